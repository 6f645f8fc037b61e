package constraint

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		constraint string
		actual     string
		want       bool
	}{
		// Exact pins.
		{"595.91.07", "595.91.07", true},
		{"595.91.07", "595.91.08", false},
		{"595.91.07", "580.95.05", false},
		{"= 1.50.0", "1.50.0", true},
		{"==1.50.0", "1.50.0", true},
		{"3.3", "3.3.0", true},
		{"3.3", "3.3.1", false},
		// Suffix tolerance: a pin without suffix accepts a build tag.
		{"2.6.0", "2.6.0amzn1.0", true},
		{"2.6.0", "2.7.0amzn1.0", false},
		{"3.3.0", "3.3.0g", true},
		{"1.13.0", "1.13.0g", true},
		{"1.21.1", "v1.21.1", true},
		// A pin with a suffix is an exact string.
		{"7.0.0-1014-aws", "7.0.0-1014-aws", true},
		{"7.0.0-1014-aws", "7.0.0-1015-aws", false},
		{"7.0.0-1014-aws", "7.0.0-1014-azure", false},
		{"2.6.0amzn1.0", "2.6.0amzn1.0", true},
		{"2.6.0amzn1.0", "2.6.0amzn2.0", false},
		{"1.13.0g", "1.13.0", false},
		// Ranges.
		{">= 3.3.0", "3.3.0g", true},
		{">= 3.3.0", "3.2.9", false},
		{">= 3.3, < 4", "3.9.12", true},
		{">= 3.3, < 4", "4.0.0", false},
		{">=3.3,<4", "3.3", true},
		{"> 2.6.0", "2.6.0amzn1.0", false},
		{"<= 2.6.0", "2.6.0amzn1.0", true},
		{"< 2.6.0", "2.5.99", true},
		{"!= 580.95.05", "595.91.07", true},
		{"!= 580.95.05", "580.95.05", false},
		{">= 7.0.0-1014-aws", "7.0.0-1015-aws", true},
		{">= 7.0.0-1014-aws", "7.0.0-1013-aws", false},
		{"< 7.0.0-1014-aws", "7.0.0-1013-aws", true},
		// Pessimistic.
		{"~> 3.3", "3.9.0", true},
		{"~> 3.3", "4.0.0", false},
		{"~> 3.3", "3.2.0", false},
		{"~> 1.21.0", "1.21.5", true},
		{"~> 1.21.0", "1.22.0", false},
		{"~> 595", "595.91.07", true},
		{"~> 595", "596.0", false},
		// Leading zeros are numbers.
		{"595.91.7", "595.91.07", true},
	}
	for _, tt := range tests {
		c, err := Parse(tt.constraint)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tt.constraint, err)
		}
		got, err := c.Check(tt.actual)
		if err != nil {
			t.Fatalf("%q.Check(%q): %v", tt.constraint, tt.actual, err)
		}
		if got != tt.want {
			t.Errorf("%q.Check(%q) = %v, want %v", tt.constraint, tt.actual, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		mention string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{">=", "no version"},
		{">= 3.3,", "empty clause"},
		{">= abc", `"abc"`},
		{">= 3.3 < 4", "commas"},
		{"~> 2.6.0amzn1.0", "plain dotted"},
		{"latest", `"latest"`},
		{"99999999999999999999.1", "out of range"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", tt.in)
			continue
		}
		if !strings.Contains(err.Error(), tt.mention) {
			t.Errorf("Parse(%q) error %q does not mention %q", tt.in, err, tt.mention)
		}
	}
}

func TestCheckBadActual(t *testing.T) {
	c := MustParse(">= 3.3")
	for _, actual := range []string{"", "unknown", "modinfo: ERROR: Module efa not found.", "N/A"} {
		ok, err := c.Check(actual)
		if err == nil || ok {
			t.Errorf("Check(%q) = %v, %v; want false and an error", actual, ok, err)
		}
	}
	var zero Constraint
	if ok, err := zero.Check("1.0"); ok || err == nil {
		t.Errorf("zero Constraint Check = %v, %v; want false and an error", ok, err)
	}
}

func TestParseVersion(t *testing.T) {
	v, err := ParseVersion("7.0.0-1014-aws")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Parts) != 3 || v.Parts[0] != 7 || v.Suffix != "-1014-aws" {
		t.Errorf("ParseVersion = %+v", v)
	}
	v, _ = ParseVersion("2.6.0amzn1.0")
	if len(v.Parts) != 3 || v.Suffix != "amzn1.0" {
		t.Errorf("ParseVersion(2.6.0amzn1.0) = %+v", v)
	}
	v, _ = ParseVersion("1.")
	if len(v.Parts) != 1 || v.Suffix != "." {
		t.Errorf("ParseVersion(1.) = %+v", v)
	}
}

func FuzzConstraint(f *testing.F) {
	for _, s := range []string{"595.91.07", ">= 3.3, < 4", "~> 1.21.0", "7.0.0-1014-aws", "!= 2.6.0amzn1.0", ",", "v1"} {
		f.Add(s, "2.6.0amzn1.0")
	}
	f.Fuzz(func(t *testing.T, cons, actual string) {
		c, err := Parse(cons)
		if err != nil {
			return
		}
		ok, err := c.Check(actual)
		if err != nil && ok {
			t.Fatalf("Check(%q) on %q returned true with error %v", actual, cons, err)
		}
	})
}
