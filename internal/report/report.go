// Package report writes a bake's outcome as JSON (the machine-readable record, schema in
// SCHEMA.md), JUnit XML (for CI test reporters) and Markdown (for $GITHUB_STEP_SUMMARY), and
// renders the fixed-width table shown in the Packer UI. It carries only what the checks
// produced: no environment values are added.
package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// SchemaVersion is the version of the JSON report; bump it on any incompatible change.
// 2: typed drift and NCCL figures, layers as check entries, results cancelled and error.
// 3: result deferred (a two-phase bake's first phase) and deferred_checks; the optional launch.
const SchemaVersion = 3

// File names Write produces inside its directory.
const (
	JSONFile     = "dlami-report.json"
	JUnitFile    = "dlami-report.junit.xml"
	MarkdownFile = "dlami-report.md"
	// HTMLFile is the report for a person in a browser (html.go): one self-contained file.
	HTMLFile = "dlami-report.html"
)

// Overall results.
const (
	ResultPass = "pass"
	ResultFail = "fail"
	// ResultCancelled: the bake was interrupted (Ctrl-C, a CI job timeout) before it finished.
	ResultCancelled = "cancelled"
	// ResultError: the bake could not finish for a reason that is not a verdict on the host
	// (an internal error, a host that stopped answering).
	ResultError = "error"
	// ResultDeferred: the first phase of a two-phase bake (defer_validation = true) passed
	// everything it judged (the guard, the layers, the last drift check) and left the host
	// suite and the NCCL test to the post-processor's verification instance
	// (complete_validation = true). It is not a pass: the image is not validated yet.
	ResultDeferred = "deferred"
)

// Report is one bake's outcome. See SCHEMA.md.
type Report struct {
	SchemaVersion      int               `json:"schema_version"`
	PluginVersion      string            `json:"plugin_version"`
	BuildName          string            `json:"build_name"`
	StartedAt          time.Time         `json:"started_at"`
	FinishedAt         time.Time         `json:"finished_at"`
	Result             string            `json:"result"`
	FailedChecks       []string          `json:"failed_checks"`
	InstanceType       string            `json:"instance_type"`
	InstanceTypeSource string            `json:"instance_type_source"`
	Stage              string            `json:"stage"`
	Checks             []result.Check    `json:"checks"`
	Drift              []result.Drift    `json:"drift"`
	Manifest           map[string]string `json:"manifest"`
	// NCCL is the NCCL test's figures; nil when the test did not run.
	NCCL *result.NCCLFigures `json:"nccl"`
	// DeferredChecks are the checks this bake left to the post-processor (defer_validation =
	// true); empty otherwise.
	DeferredChecks []string `json:"deferred_checks"`
	// Launch is how the post-processor got the instance it verified on (which instance type,
	// and which were refused for capacity); nil in a bake's report.
	Launch *Launch `json:"launch,omitempty"`
	// HeldByPlugin lists guarded packages the provisioner put on hold (hold_unheld = true).
	HeldByPlugin []string `json:"held_by_plugin,omitempty"`
	// Error is the error the bake failed with, if any.
	Error string `json:"error,omitempty"`
	// Simulated is the check id a `dlami-node-check --simulate-failure` run failed on purpose
	// to drill the pipeline (evidence, drain, condition, metrics, replacement); "" for a real
	// verdict. A simulated report's failure is not a finding about the node.
	Simulated string `json:"simulated,omitempty"`
	// Evidence and Replacement are dlami-node-check's: what it kept of a failing node and
	// what it asked of the engine that replaces it; nil when it did neither.
	Evidence    *Evidence    `json:"evidence,omitempty"`
	Replacement *Replacement `json:"replacement,omitempty"`
	// BuildInstance is the instance a provisioner's bake ran on and how long it had run when
	// provisioning ended; nil in the post-processor's and the node check's reports.
	BuildInstance *BuildInstance `json:"build_instance,omitempty"`
	// Cost is the run's instance time (dlami-cost.json), in the post-processor's reports: it
	// adds it once every instance of the run is gone; nil before that and in a bake's report.
	Cost *Cost `json:"cost,omitempty"`
	// Changes is what changed since a previous bill of materials (a rebake with
	// previous_bom_file); nil when none was given.
	Changes *result.Changes `json:"changes,omitempty"`
}

// Launch is the verification instance the post-processor launched: the instance type and
// subnet it got, and every earlier candidate EC2 refused for capacity.
type Launch struct {
	InstanceType string `json:"instance_type"`
	SubnetID     string `json:"subnet_id,omitempty"`
	// MarketType is "capacity-block" for a Capacity Block launch, else empty (on-demand).
	MarketType            string `json:"market_type,omitempty"`
	CapacityReservationID string `json:"capacity_reservation_id,omitempty"`
	// Refused are the candidates tried before, in order, with EC2's answer.
	Refused []LaunchRefusal `json:"refused"`
	// EFA is how many EFA interfaces the launch attached, EFASetting the setting that chose
	// it; NetworkInterfaces the launch's interfaces ("card/device type"), when it named them.
	EFA               int      `json:"efa"`
	EFASetting        string   `json:"efa_setting,omitempty"`
	NetworkInterfaces []string `json:"network_interfaces,omitempty"`
	// SecurityGroups are the instance's groups; PlacementGroup the group it launched into;
	// ElasticIP the temporary Elastic IP it was reached by.
	SecurityGroups []string `json:"security_groups,omitempty"`
	PlacementGroup string   `json:"placement_group,omitempty"`
	ElasticIP      string   `json:"elastic_ip,omitempty"`
	// InstanceID is the instance this report judged; Nodes, in a multi-node test's report,
	// every node of the launch in the order of the test's host file.
	InstanceID string       `json:"instance_id,omitempty"`
	Nodes      []LaunchNode `json:"nodes,omitempty"`
}

// LaunchNode is one node of a launch of several.
type LaunchNode struct {
	InstanceID string `json:"instance_id"`
	// PrivateIP is the address the nodes reached each other at.
	PrivateIP      string `json:"private_ip"`
	InstanceType   string `json:"instance_type"`
	SubnetID       string `json:"subnet_id,omitempty"`
	PlacementGroup string `json:"placement_group,omitempty"`
	// EFA is how many EFA interfaces EC2 describes on it.
	EFA int `json:"efa"`
	// HostName is what it called itself, the name its NCCL lines carry.
	HostName string `json:"host_name,omitempty"`
	// TestSeconds is how long it spent in the multi-node test (its share of the GPU time).
	TestSeconds float64 `json:"test_seconds"`
	// NCCL is the figures of the node's own NCCL test in its first-boot verification; nil
	// when it ran none (the post-processor's nccl = true runs one).
	NCCL *result.NCCLFigures `json:"nccl,omitempty"`
}

// LaunchRefusal is one candidate EC2 had no capacity for.
type LaunchRefusal struct {
	InstanceType string `json:"instance_type"`
	SubnetID     string `json:"subnet_id,omitempty"`
	Code         string `json:"code"`
	Message      string `json:"message"`
}

// Normalize returns r ready to write: schema version set, nil lists and maps made empty (so
// the JSON has [] and {}, never null, except nccl), failed_checks derived from the checks, and
// result derived so that it can only be "pass" when nothing failed:
//
//   - "cancelled" and "error" are kept as the caller set them;
//   - "fail" when r.Result is "fail" or any check (layers included) has status fail or error;
//   - "deferred" when r.Result is "deferred" and nothing failed;
//   - otherwise "pass" when r.Result is "pass", or when r.Result is empty and there is at
//     least one check (a report that judged nothing does not pass by default).
//
// Whenever the result is not "pass", failed_checks is not empty: if no check failed, an entry
// "bake:<result>" with status error (fail for "fail") and r.Error as its message is added, so
// a CI test reporter never shows a failed bake as green. Any other r.Result is an error.
func Normalize(r Report) (Report, error) {
	switch r.Result {
	case "", ResultPass, ResultFail, ResultCancelled, ResultError, ResultDeferred:
	default:
		return Report{}, fmt.Errorf("report: result %q: use %q, %q, %q, %q, %q or leave it empty to derive it from the checks", r.Result, ResultPass, ResultFail, ResultCancelled, ResultError, ResultDeferred)
	}
	r.SchemaVersion = SchemaVersion
	r.Checks = append([]result.Check{}, r.Checks...)
	failed := result.Failed(r.Checks)
	switch {
	case r.Result == ResultCancelled || r.Result == ResultError:
	case r.Result == ResultFail || failed:
		r.Result = ResultFail
	case r.Result == ResultDeferred:
	case r.Result == ResultPass || len(r.Checks) > 0:
		r.Result = ResultPass
	default:
		r.Result = ResultFail
	}
	if r.Result != ResultPass && r.Result != ResultDeferred && !failed {
		st := result.Error
		if r.Result == ResultFail {
			st = result.Fail
		}
		msg := r.Error
		if msg == "" {
			msg = "the bake did not pass and no check says why"
		}
		r.Checks = append(r.Checks, result.Check{ID: result.BakePrefix + r.Result, Status: st, Expected: "the bake finishes", Actual: r.Result, Message: msg})
	}
	r.FailedChecks = result.FailedIDs(r.Checks)
	if r.Drift == nil {
		r.Drift = []result.Drift{}
	}
	r.DeferredChecks = append([]string{}, r.DeferredChecks...)
	if r.Launch != nil {
		l := *r.Launch
		l.Refused = append([]LaunchRefusal{}, l.Refused...)
		r.Launch = &l
	}
	if r.Manifest == nil {
		r.Manifest = map[string]string{}
	}
	if r.Cost != nil {
		c := normalizeCost(*r.Cost)
		r.Cost = &c
	}
	return r, nil
}

// Write writes the JSON, JUnit, Markdown and HTML reports into dir (created if need be) and
// returns their paths, with secrets redacted (Redact). The four are written as a set: all are
// rendered and written to synced temporary files first, then renamed into place with the JSON
// report, the verdict of record, last; a crash before that last rename leaves the previous
// JSON verdict, never half a file, and every report of a set carries the same finished_at.
func Write(dir string, r Report, secrets ...string) ([]string, error) {
	n, err := Normalize(r)
	if err != nil {
		return nil, err
	}
	if n, err = Redact(n, secrets); err != nil {
		return nil, err
	}
	js, err := JSON(n)
	if err != nil {
		return nil, err
	}
	ju, err := JUnit(n)
	if err != nil {
		return nil, err
	}
	md := Markdown(n)
	page, err := HTML(n)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: creating %s: %w", dir, err)
	}
	files := []struct {
		name string
		data []byte
	}{{HTMLFile, page}, {MarkdownFile, []byte(md)}, {JUnitFile, ju}, {JSONFile, js}}
	temps := make([]string, len(files))
	defer func() {
		for _, t := range temps {
			if t != "" {
				_ = os.Remove(t)
			}
		}
	}()
	for i, f := range files {
		if temps[i], err = writeTemp(filepath.Join(dir, f.name), f.data); err != nil {
			return nil, err
		}
	}
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f.name)
		if err := os.Rename(temps[i], paths[i]); err != nil {
			return nil, fmt.Errorf("report: writing %s: %w", paths[i], err)
		}
		temps[i] = ""
	}
	syncDir(dir)
	// JSON first in the answer, as callers print it.
	return []string{paths[3], paths[2], paths[1], paths[0]}, nil
}

// writeTemp writes data to a synced temporary file beside path, for a rename into place.
func writeTemp(path string, data []byte) (string, error) {
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("report: writing %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("report: writing %s: %w", path, err)
	}
	return f.Name(), nil
}

// syncDir makes the renames durable; a directory that cannot be synced costs only that.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// JSON renders the normalized report as indented JSON.
func JSON(r Report) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	// Evidence holds raw command output; keep <, > and & readable.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("report: encoding JSON: %w", err)
	}
	return b.Bytes(), nil
}

// WriteAtomic writes data to path through a synced temporary file renamed into place, so a
// reader never sees half a file.
func WriteAtomic(path string, data []byte) error {
	tmp, err := writeTemp(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	return nil
}

// NCCLOf is the NCCL figures of the JSON report in dir (a node's first-boot verification, for
// the plot of each node in the multi-node report); nil when it has none or cannot be read.
func NCCLOf(dir string) *result.NCCLFigures {
	data, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if err != nil {
		return nil
	}
	var r Report
	if json.Unmarshal(data, &r) != nil {
		return nil
	}
	return r.NCCL
}
