package settings

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// ContainerCheck are the container-gpu check's settings (container_check): what its
// containers run from. The check never pulls (a verification instance may have no route out):
// Image must already be in each engine's local store (a layer loads it: `docker load`, `ctr
// image import`), Rootfs is a directory on the image that containerd runs with `ctr run
// --rootfs`. With neither the check warns and names this setting; it never passes.
type ContainerCheck struct {
	Skip   bool   `json:"skip"`
	Image  string `json:"image,omitempty"`
	Rootfs string `json:"rootfs,omitempty"`
	// Namespace is containerd's namespace of Image ("default"; kubelet's images are in
	// "k8s.io").
	Namespace string `json:"containerd_namespace,omitempty"`
	// Timeout bounds one container's run.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Defaults of ContainerCheck.
const (
	DefaultContainerTimeout   = 2 * time.Minute
	DefaultContainerNamespace = "default"
)

// ContainerCheckSetting names the block in messages.
const ContainerCheckSetting = "container_check"

// Judges reports whether the check has something to start a container from.
func (c ContainerCheck) Judges() bool { return c.Image != "" || c.Rootfs != "" }

// resolved fills in the defaults.
func (c ContainerCheck) resolved() ContainerCheck {
	if c.Timeout <= 0 {
		c.Timeout = DefaultContainerTimeout
	}
	if c.Namespace == "" {
		c.Namespace = DefaultContainerNamespace
	}
	return c
}

// imageRef is what an image reference may hold (registry host and port, path, tag, digest):
// nothing a shell or an engine's option parser could read otherwise.
var imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$`)

var namespaceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate reports every bad setting, named with prefix.
func (c ContainerCheck) Validate(prefix string) []error {
	var errs []error
	p := prefix + ContainerCheckSetting + "."
	if c.Image != "" && !imageRef.MatchString(c.Image) {
		errs = append(errs, fmt.Errorf("%simage = %q: not an image reference (letters, digits and . _ / : @ + -, not starting with '-'), e.g. public.ecr.aws/amazonlinux/amazonlinux:2023-minimal", p, c.Image))
	}
	if c.Rootfs != "" && (!path.IsAbs(c.Rootfs) || strings.ContainsAny(c.Rootfs, " \t\n'\"$`\\") || path.Clean(c.Rootfs) == "/") {
		errs = append(errs, fmt.Errorf("%srootfs = %q: use an absolute path of a root filesystem directory on the image (no spaces or quotes), not /", p, c.Rootfs))
	}
	if c.Namespace != "" && !namespaceName.MatchString(c.Namespace) {
		errs = append(errs, fmt.Errorf("%scontainerd_namespace = %q: letters, digits, '.', '_' and '-' only", p, c.Namespace))
	}
	if c.Timeout != 0 && c.Timeout < time.Second {
		errs = append(errs, fmt.Errorf("%stimeout must be at least 1s, got %s", p, c.Timeout))
	}
	return errs
}
