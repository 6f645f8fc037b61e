package secretfilter

import (
	"bytes"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

func TestFilterRules(t *testing.T) {
	f := New("tok3n", "tok3n-longer", "ab", "", "-----BEGIN KEY-----\r\nline-one-abc\r\nxy\r\n-----END KEY-----", "tok3n")
	for in, want := range map[string]string{
		"curl -H tok3n-longer":               "curl -H " + Redacted,
		"tok3n and tok3n":                    Redacted + " and " + Redacted,
		"ab stays, a two-letter value":       "ab stays, a two-letter value",
		"printed line by line: line-one-abc": "printed line by line: " + Redacted,
		"xy":                                 "xy",
	} {
		if got := f.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	if s := f.Secrets(); len(s) == 0 || s[0] != "-----BEGIN KEY-----\r\nline-one-abc\r\nxy\r\n-----END KEY-----" || slices.Contains(s, "ab") || slices.Contains(s, "xy") {
		t.Errorf("Secrets() = %q: want the longest first, nothing under %d characters", s, MinLength)
	}
	if n := strings.Count(strings.Join(f.Secrets(), "\x00"), "tok3n\x00"); n > 1 {
		t.Errorf("duplicates: %q", f.Secrets())
	}
	var empty *Filter
	if empty.String("x") != "x" || !empty.Empty() || !New("ab").Empty() {
		t.Error("an empty filter changed something")
	}
}

// recorder is a packersdk.Ui that keeps what it is sent.
type recorder struct {
	packersdk.Ui
	got []string
}

func (r *recorder) Ask(q string) (string, error) { r.got = append(r.got, "ask "+q); return "", nil }
func (r *recorder) Say(m string)                 { r.got = append(r.got, "say "+m) }
func (r *recorder) Message(m string)             { r.got = append(r.got, "message "+m) }
func (r *recorder) Error(m string)               { r.got = append(r.got, "error "+m) }
func (r *recorder) Machine(c string, args ...string) {
	r.got = append(r.got, "machine "+c+" "+strings.Join(args, " "))
}

// Every way a plugin talks to Packer's UI is filtered; the wrapped UI gets the filtered text.
func TestUIFiltersEveryMethod(t *testing.T) {
	base := &recorder{}
	ui := UI(base, "s3cr3t-value")
	ui.Say("s3cr3t-value")
	ui.Sayf("%s", "s3cr3t-value")
	ui.Message("s3cr3t-value")
	ui.Error("s3cr3t-value")
	ui.Errorf("%s", "s3cr3t-value")
	ui.Machine("artifact", "s3cr3t-value")
	_, _ = ui.Ask("s3cr3t-value")
	_, _ = ui.Askf("%s", "s3cr3t-value")
	want := []string{"say ", "say ", "message ", "error ", "error ", "machine artifact ", "ask ", "ask "}
	for i := range want {
		want[i] += Redacted
	}
	if !slices.Equal(base.got, want) {
		t.Errorf("the UI got %q\nwant %q", base.got, want)
	}
	var out bytes.Buffer
	basic := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out}
	if UI(basic) != packersdk.Ui(basic) || UI(basic, "ab") != packersdk.Ui(basic) {
		t.Error("a UI without secrets was wrapped")
	}
	// Wrapping twice filters with both sets, once.
	base.got = nil
	UI(ui, "other-secret").Say("s3cr3t-value other-secret")
	if !slices.Equal(base.got, []string{"say " + Redacted + " " + Redacted}) {
		t.Errorf("twice wrapped: %q", base.got)
	}
}

func TestErrorIsFilteredAndStillUnwraps(t *testing.T) {
	f := New("s3cr3t-value")
	base := &fs.PathError{Op: "open", Path: "/x/s3cr3t-value", Err: fs.ErrNotExist}
	err := f.Error(base)
	if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), Redacted) {
		t.Errorf("error %q", err)
	}
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		t.Error("the filtered error lost its chain")
	}
	if f.Error(nil) != nil {
		t.Error("nil became an error")
	}
}
