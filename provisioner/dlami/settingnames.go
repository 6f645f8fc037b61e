package dlami

import "strings"

// ncclFields maps the NCCLOptions field names that checks' validation messages start with
// ("nccl: Ranks 99: ...") to the settings of the nccl block, so that the user reads the name
// they wrote. TimeoutSeconds is the timeout in whole seconds.
var ncclFields = []struct{ field, setting string }{
	{"CUDAVersion", "nccl.cuda_version"},
	{"Transport", "nccl.transport"},
	{"Ranks", "nccl.ranks"},
	{"TimeoutSeconds", "nccl.timeout (in seconds)"},
	{"Args", "nccl.args"},
	{"Env key", "nccl.env key"},
	{"Env", "nccl.env"},
}

// ncclSettingError rewrites a validation message of checks.NCCLCommand to name the setting.
func ncclSettingError(err error) error {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "nccl: ")
	if !ok {
		return err
	}
	for _, f := range ncclFields {
		if after, ok := strings.CutPrefix(rest, f.field); ok && (after == "" || after[0] == ' ' || after[0] == '[' || after[0] == ':') {
			return &settingError{msg: f.setting + after, err: err}
		}
	}
	return err
}

// settingError is a validation error reworded to name the template's setting.
type settingError struct {
	msg string
	err error
}

func (e *settingError) Error() string { return e.msg }
func (e *settingError) Unwrap() error { return e.err }
