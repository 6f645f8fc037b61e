// Package secretfilter keeps secrets out of what the plugin shows and writes: it replaces every
// secret in a string, and in every line sent to the Packer UI, with Redacted.
//
// Packer's own filter (packersdk.LogSecretFilter) covers the plugin's log only: the UI lines a
// plugin sends travel to Packer as they are, and Packer's UI filters only the values of its own
// sensitive variables. A layer's `set -x` trace of a token, or a repository URL in apt's
// output, would reach the CI log. Every provisioner and post-processor hands its UI on through
// UI.
package secretfilter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"
)

// Redacted replaces a secret.
const Redacted = "<sensitive>"

// MinLength is the shortest value treated as a secret: shorter ones ("1", "efa", "on") would
// blank out unrelated text, and are not credentials.
const MinLength = 4

// Filter replaces a set of secrets. The zero value replaces nothing.
type Filter struct {
	// secrets, longest first, so that a secret that contains another is replaced whole.
	secrets []string
}

// New returns a filter of secrets: each value of at least MinLength characters and, for a
// value of several lines, each line of at least MinLength (a multi-line key is printed line by
// line).
func New(secrets ...string) *Filter {
	seen := map[string]bool{}
	var keep []string
	add := func(s string) {
		if len(s) >= MinLength && !seen[s] {
			seen[s] = true
			keep = append(keep, s)
		}
	}
	for _, s := range secrets {
		add(s)
		norm := strings.ReplaceAll(s, "\r\n", "\n")
		if strings.Contains(norm, "\n") {
			add(norm)
			for _, line := range strings.Split(norm, "\n") {
				add(strings.TrimRight(line, "\r"))
			}
		}
	}
	slices.SortStableFunc(keep, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return &Filter{secrets: keep}
}

// Secrets are the values the filter replaces, longest first.
func (f *Filter) Secrets() []string {
	if f == nil {
		return nil
	}
	return slices.Clone(f.secrets)
}

// Empty reports whether the filter replaces nothing.
func (f *Filter) Empty() bool { return f == nil || len(f.secrets) == 0 }

// String returns s with every secret replaced by Redacted.
func (f *Filter) String(s string) string {
	if f == nil {
		return s
	}
	for _, sec := range f.secrets {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}

// UI returns ui with every message, error, question and machine-readable argument it is sent
// filtered through secrets (New's rules); ui itself when none is a secret.
func UI(ui packersdk.Ui, secrets ...string) packersdk.Ui { return New(secrets...).UI(ui) }

// UI returns ui with everything it is sent filtered through f; ui itself when f is empty.
func (f *Filter) UI(ui packersdk.Ui) packersdk.Ui {
	if f.Empty() {
		return ui
	}
	if fu, ok := ui.(*filteredUI); ok {
		// Filter once, with both sets.
		return &filteredUI{Ui: fu.Ui, f: New(append(fu.f.Secrets(), f.Secrets()...)...)}
	}
	return &filteredUI{Ui: ui, f: f}
}

// Error returns err with its message filtered through f (errors.Is and errors.As still reach
// err): a plugin's error travels to Packer as its text, and Packer prints it. nil stays nil.
func (f *Filter) Error(err error) error {
	if err == nil || f.Empty() {
		return err
	}
	return &filteredError{err: err, msg: f.String(err.Error())}
}

type filteredError struct {
	err error
	msg string
}

func (e *filteredError) Error() string { return e.msg }
func (e *filteredError) Unwrap() error { return e.err }

// filteredUI is a packersdk.Ui that filters what it passes on; TrackProgress (a download's
// progress bar) passes as it is.
type filteredUI struct {
	packersdk.Ui
	f *Filter
}

func (u *filteredUI) Ask(q string) (string, error) { return u.Ui.Ask(u.f.String(q)) }
func (u *filteredUI) Askf(format string, args ...any) (string, error) {
	return u.Ask(fmt.Sprintf(format, args...))
}
func (u *filteredUI) Say(m string)                    { u.Ui.Say(u.f.String(m)) }
func (u *filteredUI) Sayf(format string, args ...any) { u.Say(fmt.Sprintf(format, args...)) }
func (u *filteredUI) Message(m string)                { u.Ui.Message(u.f.String(m)) }
func (u *filteredUI) Error(m string)                  { u.Ui.Error(u.f.String(m)) }
func (u *filteredUI) Errorf(format string, args ...any) {
	u.Error(fmt.Sprintf(format, args...))
}

func (u *filteredUI) Machine(category string, args ...string) {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = u.f.String(a)
	}
	u.Ui.Machine(category, out...)
}
