package nodeconf

import (
	"bytes"
	"encoding/json"
	"time"
)

// The config file's JSON: one type with the node_check block, durations written as Go and
// HCL read them ("5m0s"), unknown fields refused.

// configJSON is Config as the file writes it: durations as Go writes them ("5m0s").
type configJSON struct {
	*plainConfig
	Timeout      duration `json:"timeout"`
	CheckTimeout duration `json:"check_timeout"`
}

type plainConfig Config

// MarshalJSON writes c with its durations as "5m0s".
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(configJSON{plainConfig: (*plainConfig)(&c), Timeout: duration(c.Timeout), CheckTimeout: duration(c.CheckTimeout)})
}

// UnmarshalJSON reads what MarshalJSON writes; unknown fields are refused, so a typo never
// silently falls back to a default.
func (c *Config) UnmarshalJSON(data []byte) error {
	w := configJSON{plainConfig: (*plainConfig)(c)}
	if err := strictJSON(data, &w); err != nil {
		return err
	}
	c.Timeout, c.CheckTimeout = time.Duration(w.Timeout), time.Duration(w.CheckTimeout)
	return nil
}

// strictJSON decodes data into v, refusing unknown fields.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// duration is a duration written the way Go and HCL read it ("5m0s").
type duration time.Duration

// MarshalText writes d as "5m0s".
func (d duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a duration such as "5m0s" or "90s".
func (d *duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = duration(v)
	return nil
}

// evidenceJSON is Evidence as the config file writes it: the bound as Go writes it ("3m0s").
type evidenceJSON struct {
	*plainEvidence
	BugReportTimeout duration `json:"bug_report_timeout,omitempty"`
}

type plainEvidence Evidence

// MarshalJSON writes e with its bound as "3m0s".
func (e Evidence) MarshalJSON() ([]byte, error) {
	return json.Marshal(evidenceJSON{plainEvidence: (*plainEvidence)(&e), BugReportTimeout: duration(e.BugReportTimeout)})
}

// UnmarshalJSON reads what MarshalJSON writes, refusing unknown fields.
func (e *Evidence) UnmarshalJSON(data []byte) error {
	w := evidenceJSON{plainEvidence: (*plainEvidence)(e)}
	if err := strictJSON(data, &w); err != nil {
		return err
	}
	e.BugReportTimeout = time.Duration(w.BugReportTimeout)
	return nil
}
