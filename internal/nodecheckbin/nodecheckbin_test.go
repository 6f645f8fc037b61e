package nodecheckbin

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestPlaceholderRefused(t *testing.T) {
	placeholder := fstest.MapFS{"dist/README.md": {Data: []byte("placeholder")}}
	err := available(placeholder)
	if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "linux/amd64") {
		t.Errorf("placeholder: %v", err)
	}
	notELF := fstest.MapFS{"dist/linux_amd64/dlami-node-check": {Data: []byte("#!/bin/sh")}, "dist/linux_arm64/dlami-node-check": {Data: []byte("\x7fELF")}}
	if err := available(notELF); err == nil || !strings.Contains(err.Error(), "not an ELF binary") {
		t.Errorf("not ELF: %v", err)
	}
	ok := fstest.MapFS{"dist/linux_amd64/dlami-node-check": {Data: []byte("\x7fELF..")}, "dist/linux_arm64/dlami-node-check": {Data: []byte("\x7fELF..")}}
	if err := available(ok); err != nil {
		t.Error(err)
	}
}

func TestArch(t *testing.T) {
	for m, want := range map[string]string{"x86_64": "amd64", "aarch64": "arm64"} {
		if got, err := Arch(m); got != want || err != nil {
			t.Errorf("Arch(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := Arch("riscv64"); err == nil {
		t.Error("riscv64 accepted")
	}
}
