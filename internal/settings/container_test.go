package settings

import (
	"strings"
	"testing"
	"time"
)

func TestContainerCheckValidate(t *testing.T) {
	ok := []ContainerCheck{
		{},
		{Image: "public.ecr.aws/amazonlinux/amazonlinux:2023-minimal"},
		{Image: "nvcr.io/nvidia/cuda@sha256:0123abcd", Namespace: "k8s.io", Timeout: time.Minute},
		{Rootfs: "/opt/dlami/gpu-rootfs"},
	}
	for _, c := range ok {
		if errs := c.Validate(""); len(errs) != 0 {
			t.Errorf("%+v: %v", c, errs)
		}
	}
	bad := []struct {
		c       ContainerCheck
		mention string
	}{
		{ContainerCheck{Image: "--privileged"}, "container_check.image"},
		{ContainerCheck{Image: "img; rm -rf /"}, "container_check.image"},
		{ContainerCheck{Rootfs: "relative/dir"}, "container_check.rootfs"},
		{ContainerCheck{Rootfs: "/"}, "container_check.rootfs"},
		{ContainerCheck{Rootfs: "/opt/a b"}, "container_check.rootfs"},
		{ContainerCheck{Namespace: "k8s io"}, "container_check.containerd_namespace"},
		{ContainerCheck{Timeout: time.Millisecond}, "container_check.timeout"},
	}
	for _, b := range bad {
		errs := b.c.Validate("node_check.")
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "node_check."+b.mention) {
			t.Errorf("%+v: %v, want one error naming %s", b.c, errs, b.mention)
		}
	}
	r := Function{}.Resolved().Container
	if r.Timeout != DefaultContainerTimeout || r.Namespace != DefaultContainerNamespace || r.Judges() {
		t.Errorf("resolved %+v", r)
	}
}
