// Package nodecheckbin carries the dlami-node-check binaries for Linux inside the plugin, so
// that the provisioner installs them into the image without a download at bake time, whatever
// Packer runs on (macOS, Windows, Linux). `make node-check` builds them into dist/ before the
// plugin is built (make build, make dev and the release's goreleaser hook do it first); a plain
// `go build .` embeds only the placeholder README, and node_check is then refused at Prepare.
package nodecheckbin

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Arches are the Linux architectures shipped, as GOARCH names them.
var Arches = []string{"amd64", "arm64"}

// path of one binary inside dist.
func path(arch string) string { return "dist/linux_" + arch + "/dlami-node-check" }

// elfMagic starts every ELF file.
var elfMagic = []byte{0x7f, 'E', 'L', 'F'}

// Binary returns the node check for linux/arch.
func Binary(arch string) ([]byte, error) {
	return binary(dist, arch)
}

func binary(fsys fs.FS, arch string) ([]byte, error) {
	b, err := fs.ReadFile(fsys, path(arch))
	if err != nil {
		return nil, fmt.Errorf("this plugin was built without the dlami-node-check binary for linux/%s: build the plugin with `make build` (or `make dev`), which runs `make node-check` first, not a plain `go build .`", arch)
	}
	if !bytes.HasPrefix(b, elfMagic) {
		return nil, fmt.Errorf("the embedded dlami-node-check for linux/%s is not an ELF binary: rebuild with `make node-check` and then the plugin", arch)
	}
	return b, nil
}

// Available reports whether the binaries of every shipped architecture are embedded.
func Available() error {
	return available(dist)
}

func available(fsys fs.FS) error {
	for _, a := range Arches {
		if _, err := binary(fsys, a); err != nil {
			return err
		}
	}
	return nil
}

// Arch maps `uname -m` to the GOARCH of the binary to install.
func Arch(machine string) (string, error) {
	switch machine {
	case "x86_64", "amd64":
		return "amd64", nil
	case "aarch64", "arm64":
		return "arm64", nil
	}
	return "", fmt.Errorf("no dlami-node-check for machine %q (shipped: linux/amd64, linux/arm64)", machine)
}
