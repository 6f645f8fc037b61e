package bom

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

func TestRoundTripAndRejects(t *testing.T) {
	b := BOM{GeneratedAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Kernel: "7.0.0-1014-aws", NextBootKernel: "7.0.0-1014-aws",
		InstanceType: "p6-b200.48xlarge", Guarded: map[string]Package{"linux-aws": {"7.0.0.1014.14", true}}, Components: map[string]string{"nvidia_driver": "595.91.07"}}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kernel != b.Kernel || got.Guarded["linux-aws"] != b.Guarded["linux-aws"] || got.SchemaVersion != SchemaVersion {
		t.Errorf("round trip: %+v", got)
	}
	cur := fmt.Sprintf(`"schema_version": %d`, SchemaVersion)
	if !strings.Contains(string(data), cur) {
		t.Fatalf("encoded without %s:\n%s", cur, data)
	}
	for name, in := range map[string]string{
		"truncated":     string(data[:len(data)/2]),
		"older schema":  strings.Replace(string(data), cur, `"schema_version": 1`, 1),
		"newer schema":  strings.Replace(string(data), cur, fmt.Sprintf(`"schema_version": %d`, SchemaVersion+1), 1),
		"unknown field": strings.Replace(string(data), cur, cur+`, "x": 1`, 1),
		"no kernel":     strings.Replace(string(data), `"kernel": "7.0.0-1014-aws"`, `"kernel": ""`, 1),
		"no guarded":    `{"schema_version": 2, "kernel": "k", "guarded": {}}`,
	} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A bill of materials carries the guard policy the bake used; one of schema 2 (before it did)
// still reads, without one.
func TestGuardPolicyAndSchema2(t *testing.T) {
	b := BOM{Kernel: "k", Guarded: map[string]Package{"a": {"1", true}}, GuardPolicy: &settings.GuardPolicy{Exclude: []string{"nvidia-container-*"}}}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || got.GuardPolicy == nil || len(got.GuardPolicy.Exclude) != 1 || got.GuardPolicy.Exclude[0] != "nvidia-container-*" {
		t.Fatalf("policy round trip: %+v, %v", got.GuardPolicy, err)
	}
	old, err := Decode([]byte(`{"schema_version": 2, "kernel": "k", "guarded": {"a": {"version": "1", "held": true}}}`))
	if err != nil || old.GuardPolicy != nil {
		t.Errorf("schema 2: %+v, %v", old, err)
	}
}

// A bake that deferred its validation says so, and which checks; an empty record is refused.
func TestDeferredValidation(t *testing.T) {
	b := BOM{Kernel: "k", Guarded: map[string]Package{"a": {"1", true}},
		Deferred: &Deferred{Checks: []string{"gpu", "nccl-correctness"}, BuildInstanceType: "c7i.8xlarge", Reason: "defer_validation = true"}}
	data, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"deferred_validation"`) {
		t.Errorf("encoded BOM lacks deferred_validation:\n%s", data)
	}
	got, err := Decode(data)
	if err != nil || got.Deferred == nil || got.Deferred.BuildInstanceType != "c7i.8xlarge" || len(got.Deferred.Checks) != 2 {
		t.Fatalf("round trip: %+v, %v", got.Deferred, err)
	}
	if _, err := Decode([]byte(strings.Replace(string(data), `"nccl-correctness"`, `"x"`, 1))); err != nil {
		t.Errorf("%v", err)
	}
	empty := `{"schema_version": 3, "kernel": "k", "guarded": {"a": {"version": "1", "held": true}}, "deferred_validation": {"checks": [], "reason": "r"}}`
	if _, err := Decode([]byte(empty)); err == nil || !strings.Contains(err.Error(), "names no checks") {
		t.Errorf("empty deferred record: %v", err)
	}
	plain, _ := BOM{Kernel: "k", Guarded: map[string]Package{"a": {"1", true}}}.Encode()
	if strings.Contains(string(plain), "deferred") {
		t.Errorf("a BOM that deferred nothing mentions it:\n%s", plain)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(`{"schema_version": 2, "kernel": "k", "guarded": {"a": {"version": "1", "held": true}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		b, err := Decode([]byte(s))
		if err == nil && (b.Kernel == "" || len(b.Guarded) == 0) {
			t.Fatal("accepted an incomplete BOM")
		}
	})
}

// An image baked by the previous release (schema 4: the expect block and the tests beside
// each other, durations in nanoseconds) still reads, with its settings in Checks; one of
// schema 3 (an expect block, no tests) and 2 (neither) get a bake's defaults for what they
// lack. A schema 5 BOM that writes the old fields, or an older one that writes the new, is
// refused.
func TestOlderSchemasReadIntoChecks(t *testing.T) {
	data, err := os.ReadFile("testdata/schema4-manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	c := b.Checks
	if c == nil || c.Expect.GPUCount != 8 || c.Expect.EFACount != 32 || c.Expect.NvidiaDriver != "595.91.07" ||
		c.NCCL.Timeout != 7*time.Minute || c.NCCL.Transport != settings.TransportEFA ||
		c.Function.DCGMLevel != 1 || c.Function.EFATraffic.MinBandwidthMBps != 3000 || c.Function.EFATraffic.Timeout != 20*time.Second ||
		c.Function.EFATraffic.Concurrency != settings.DefaultEFATrafficConcurrency || !c.Function.GDR.Skip || c.Function.GDR.BusBWFloorGBps != 40 ||
		!slices.Equal(c.Skip, []string{"lustre"}) || !slices.Equal(c.Warn, []string{"gpu-clocks"}) {
		t.Errorf("schema 4 read as %+v", c)
	}
	if b.GuardPolicy == nil || !slices.Equal(b.GuardPolicy.Exclude, []string{"nvidia-container-*"}) {
		t.Errorf("guard policy %+v", b.GuardPolicy)
	}
	// Written again, it is a schema 5 BOM with the same settings.
	again, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	b5, err := Decode(again)
	if err != nil || !reflect.DeepEqual(b5.Checks, b.Checks) || strings.Contains(string(again), `"tests"`) {
		t.Errorf("re-encoded: %v\n%s", err, again)
	}

	guarded := `"kernel": "k", "guarded": {"a": {"version": "1", "held": true}}`
	for _, tc := range []struct {
		name   string
		in     string
		expect settings.Expectations
	}{
		{"schema 3", `{"schema_version": 3, ` + guarded + `, "expect": {"gpu_model": "H100"}}`, settings.Expectations{GPUModel: "H100"}},
		{"schema 2", `{"schema_version": 2, ` + guarded + `}`, settings.Expectations{}},
	} {
		b, err := Decode([]byte(tc.in))
		want := settings.BakeDefaults()
		want.Expect = tc.expect
		if err != nil || b.Checks == nil || !reflect.DeepEqual(*b.Checks, want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, b.Checks, err, want)
		}
	}
	for name, in := range map[string]string{
		"schema 5 with tests":  `{"schema_version": 5, ` + guarded + `, "tests": {"nccl": {}, "function": {}}}`,
		"schema 5 with expect": `{"schema_version": 5, ` + guarded + `, "expect": {}}`,
		"schema 4 with checks": `{"schema_version": 4, ` + guarded + `, "checks": {}}`,
	} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
