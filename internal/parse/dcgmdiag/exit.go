package dcgmdiag

import "fmt"

// Exit is what dcgmi's exit status says. dcgmi's main returns a dcgmReturn_t (a negative
// DCGM_ST_* code), so the shell sees it modulo 256: DCGM_ST_NVVS_ERROR (-30) exits 226. The
// JSON document does not carry it; the run's wrapper reports it beside the document.
type Exit struct {
	// Status is the exit status (0-255).
	Status int
	// Name is the DCGM_ST_* name, "" when the status maps to none this package knows.
	Name string
	// TestFailed reports the statuses dcgmi returns when the diagnostic ran and a test
	// reported an error (DCGM_ST_NVVS_ERROR, DCGM_ST_NVVS_ISOLATE_ERROR): a document with no
	// failed test beside one of these has lost the failure, never a pass.
	TestFailed bool
	// Isolate is DCGM_ST_NVVS_ISOLATE_ERROR: an error whose priority is "isolate the GPU".
	Isolate bool
}

func (e Exit) String() string {
	if e.Name == "" {
		return fmt.Sprintf("exit %d", e.Status)
	}
	return fmt.Sprintf("exit %d (%s)", e.Status, e.Name)
}

// dcgmStatus names the DCGM_ST_* codes dcgmi diag returns, from dcgmlib/dcgm_structs.h (DCGM
// 4.6.0, NVIDIA/DCGM @ 72fa3fe): the code, negative, as dcgmReturn_t holds it.
var dcgmStatus = map[int]string{
	-1: "DCGM_ST_BADPARAM", -2: "(dcgmi: command-line parse error)", -3: "DCGM_ST_GENERIC_ERROR",
	-4: "DCGM_ST_MEMORY", -6: "DCGM_ST_NOT_SUPPORTED", -7: "DCGM_ST_INIT_ERROR", -8: "DCGM_ST_NVML_ERROR",
	-11: "DCGM_ST_TIMEOUT", -12: "DCGM_ST_VER_MISMATCH", -17: "DCGM_ST_NO_PERMISSION",
	-18: "DCGM_ST_GPU_IS_LOST", -19: "DCGM_ST_RESET_REQUIRED", -21: "DCGM_ST_CONNECTION_NOT_VALID",
	-22: "DCGM_ST_GPU_NOT_SUPPORTED", -23: "DCGM_ST_GROUP_INCOMPATIBLE", -29: "DCGM_ST_REQUIRES_ROOT",
	-30: "DCGM_ST_NVVS_ERROR", -33: "DCGM_ST_MODULE_NOT_LOADED", -34: "DCGM_ST_IN_USE",
	-39: "DCGM_ST_DIAG_ALREADY_RUNNING", -40: "DCGM_ST_DIAG_BAD_JSON", -41: "DCGM_ST_DIAG_BAD_LAUNCH",
	-43: "DCGM_ST_DIAG_THRESHOLD_EXCEEDED", -44: "DCGM_ST_INSUFFICIENT_DRIVER_VERSION",
	-49: "DCGM_ST_INSUFFICIENT_RESOURCES", -50: "DCGM_ST_PLUGIN_EXCEPTION", -51: "DCGM_ST_NVVS_ISOLATE_ERROR",
	-52: "DCGM_ST_NVVS_BINARY_NOT_FOUND", -53: "DCGM_ST_NVVS_KILLED", -54: "DCGM_ST_PAUSED",
	-56: "DCGM_ST_NVML_NOT_LOADED", -57: "DCGM_ST_NVML_DRIVER_TIMEOUT", -58: "DCGM_ST_NVVS_NO_AVAILABLE_TEST",
	-66: "DCGM_ST_DIAG_STOPPED", -67: "DCGM_ST_GPUS_DETACHED",
}

// ExitStatus reads dcgmi's exit status. 0 is DCGM_ST_OK; a status above 255 or below 0
// (not an exit status) has no name.
func ExitStatus(status int) Exit {
	e := Exit{Status: status}
	if status == 0 {
		e.Name = "DCGM_ST_OK"
		return e
	}
	if status < 0 || status > 255 {
		return e
	}
	code := status - 256
	e.Name = dcgmStatus[code]
	e.TestFailed = code == -30 || code == -51
	e.Isolate = code == -51
	return e
}
