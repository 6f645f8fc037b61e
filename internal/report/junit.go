package report

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name       string          `xml:"name,attr"`
	Classname  string          `xml:"classname,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Failure    *junitMessage   `xml:"failure,omitempty"`
	Error      *junitMessage   `xml:"error,omitempty"`
	Skipped    *junitMessage   `xml:"skipped,omitempty"`
	SystemOut  *junitText      `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",cdata"`
}

// junitText is element text kept readable as CDATA (newlines stay newlines); xmlSafe has
// removed the characters XML cannot carry.
type junitText struct {
	Text string `xml:",cdata"`
}

// xmlSafe replaces characters XML 1.0 cannot carry at all (NUL, most C0 controls such as
// the ESC of colour codes) with U+FFFD. encoding/xml escapes attributes itself but writes
// CDATA as is.
func xmlSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20, r == 0xFFFE, r == 0xFFFF, r >= 0xD800 && r < 0xE000:
			return '\uFFFD'
		}
		return r
	}, s)
}

func seconds(ms int64) string { return fmt.Sprintf("%.3f", float64(ms)/1000) }

// JUnit renders the normalized report as JUnit XML: one testsuite, one testcase per check.
// A failed check has a <failure>, a skipped one a <skipped>; a warning passes and says so in
// its system-out, which also carries the check's evidence.
func JUnit(r Report) ([]byte, error) {
	name := "dlami"
	if r.BuildName != "" {
		name = "dlami: " + r.BuildName
	}
	if r.Simulated != "" {
		// A CI test reporter shows the suite's name: a drill must not read as a fault.
		name += " (SIMULATED failure of " + r.Simulated + ")"
	}
	s := junitSuite{Name: name, Tests: len(r.Checks)}
	var total int64
	for _, c := range r.Checks {
		total += c.DurationMS
		jc := junitCase{Name: c.ID, Classname: "dlami." + c.ID, Time: seconds(c.DurationMS)}
		detail := fmt.Sprintf("expected: %s\nactual: %s", c.Expected, c.Actual)
		if c.Message != "" {
			detail += "\n" + c.Message
		}
		switch c.Status {
		case result.Fail:
			s.Failures++
			jc.Failure = &junitMessage{Message: oneLine(firstNonEmpty(c.Message, "expected "+c.Expected+", got "+c.Actual)), Type: "fail", Text: xmlSafe(detail)}
		case result.Error:
			s.Errors++
			jc.Error = &junitMessage{Message: oneLine(firstNonEmpty(c.Message, "did not complete")), Type: "error", Text: xmlSafe(detail)}
		case result.Skip:
			s.Skipped++
			jc.Skipped = &junitMessage{Message: oneLine(firstNonEmpty(c.Message, "skipped"))}
		case result.Warn:
			// A warning passes, but a reader must see that it was not a clean pass: most
			// often it is a check that had nothing to compare against.
			jc.Properties = []junitProperty{{"dlami.status", "warn"}, {"dlami.warning", oneLine(c.Message)}}
		case result.Pass:
		default:
			// An unknown status is not a pass.
			s.Failures++
			jc.Failure = &junitMessage{Message: fmt.Sprintf("unknown status %q", c.Status), Type: "fail", Text: xmlSafe(detail)}
		}
		var out strings.Builder
		fmt.Fprintf(&out, "status: %s\n%s", c.Status, detail)
		if c.Evidence != "" {
			fmt.Fprintf(&out, "\n\nevidence:\n%s", c.Evidence)
		}
		jc.SystemOut = &junitText{xmlSafe(out.String())}
		s.Cases = append(s.Cases, jc)
	}
	s.Time = seconds(total)
	if !r.StartedAt.IsZero() {
		s.Timestamp = r.StartedAt.UTC().Format("2006-01-02T15:04:05")
		if !r.FinishedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
			s.Time = seconds(r.FinishedAt.Sub(r.StartedAt).Milliseconds())
		}
	}
	for _, p := range []junitProperty{
		{"result", r.Result}, {"stage", r.Stage}, {"plugin_version", r.PluginVersion},
		{"instance_type", r.InstanceType}, {"instance_type_source", r.InstanceTypeSource},
		{"deferred_checks", strings.Join(r.DeferredChecks, ",")},
	} {
		if p.Value != "" {
			s.Properties = append(s.Properties, p)
		}
	}
	// The instance time, where the report carries it: the bake's build instance, the
	// post-processor's whole run (dlami-cost.json).
	if bi := r.BuildInstance; bi != nil {
		s.Properties = append(s.Properties, junitProperty{"build_instance", oneLine(bi.Summary())})
		if bi.Known {
			s.Properties = append(s.Properties, junitProperty{"build_instance_seconds", fmt.Sprintf("%.0f", bi.Seconds)})
		}
	}
	if c := r.Cost; c != nil {
		s.Properties = append(s.Properties, junitProperty{"instance_time", oneLine(c.Summary())},
			junitProperty{"instance_seconds", fmt.Sprintf("%.0f", c.InstanceSeconds)})
		if c.USD != nil {
			s.Properties = append(s.Properties, junitProperty{"instance_usd", fmt.Sprintf("%.2f", *c.USD)})
		}
	}
	if len(r.Drift) > 0 {
		lines := make([]string, len(r.Drift))
		for i, d := range r.Drift {
			lines[i] = d.String()
		}
		s.SystemOut = &junitText{xmlSafe("drift:\n" + strings.Join(lines, "\n"))}
	}
	doc := junitSuites{Name: "dlami", Tests: s.Tests, Failures: s.Failures, Errors: s.Errors, Skipped: s.Skipped, Time: s.Time, Suites: []junitSuite{s}}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("report: encoding JUnit: %w", err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func oneLine(s string) string {
	return textcut.Head(strings.Join(strings.Fields(s), " "), 600)
}
