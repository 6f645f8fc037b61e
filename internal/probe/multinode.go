package probe

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/hosttools"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// Markers of the multi-node helper scripts' own lines.
const (
	keyMarker  = "@@DLAMI-MNKEY"
	stopMarker = "@@DLAMI-MNSTOP"
)

// keyDirRE is what the test's key folder may be: Open MPI splits plm_rsh_args at spaces, so
// the path goes into ssh's arguments unquoted.
var keyDirRE = regexp.MustCompile(`^/[A-Za-z0-9._/-]+$`)

// MultiNodeScript is the NCCL test across nodes: run on the first node as the login user, it
// starts ranksPerNode ranks on each of hosts (private addresses, the first node's first) with
// Open MPI over SSH, using the key and known_hosts in keyDir. ranksPerNode 0 counts the first
// node's GPUs.
func MultiNodeScript(m settings.MultiNode, ranksPerNode int, hosts []string, keyDir string) (Script, error) {
	m, err := m.Resolved()
	if err != nil {
		return Script{}, err
	}
	if len(hosts) < 2 {
		return Script{}, fmt.Errorf("multi-node NCCL test: %d node addresses, need 2 or more", len(hosts))
	}
	for _, h := range hosts {
		if _, err := netip.ParseAddr(h); err != nil {
			return Script{}, fmt.Errorf("multi-node NCCL test: node address %q is not an IP address", h)
		}
	}
	if !keyDirRE.MatchString(keyDir) {
		return Script{}, fmt.Errorf("multi-node NCCL test: key folder %q must be an absolute path of letters, digits, '.', '_', '-'", keyDir)
	}
	return ncclScript("the multi-node NCCL test", "nccl-multinode", m.NCCLSettings(), ranksPerNode, &across{hosts: hosts, keyDir: keyDir}), nil
}

// MultiNodeKeyScript adds (or removes) the multi-node test's public key line to (from) the
// login user's authorized_keys; tag is the comment that marks the key's lines.
func MultiNodeKeyScript(add bool, keyLine, tag string) (Script, error) {
	if tag == "" || strings.ContainsAny(tag, " \t\n\r\x00") || !strings.HasSuffix(keyLine, " "+tag) || strings.ContainsAny(keyLine, "\n\r\x00") {
		return Script{}, fmt.Errorf("multi-node key: the key line must be one line ending with its tag %q", tag)
	}
	action := "remove"
	if add {
		action = "add"
	}
	text := render("multinode-key.sh", []scriptVar{{name: "M", value: keyMarker}, {name: "action", value: action},
		{name: "key_line", value: keyLine}, {name: "tag", value: tag}}, nil)
	return Script{Name: "the multi-node test's key (" + action + ")", File: "multinode-key-" + action, Text: text, Timeout: 30 * time.Second}, nil
}

// ParseMultiNodeKey reads the key script's output: how many tagged lines authorized_keys holds
// afterwards.
func ParseMultiNodeKey(output string, code int) (int, error) {
	return markerCount(output, code, keyMarker, "KEYS", "the multi-node key script")
}

// MultiNodeStopScript kills every process of the login user that belongs to a multi-node test
// (all_reduce_perf ranks, Open MPI's orted) and counts what is left.
func MultiNodeStopScript() Script {
	text := render("multinode-stop.sh", []scriptVar{{name: "M", value: stopMarker},
		{name: "pkill_paths", value: paths(hosttools.Pkill)}, {name: "pgrep_paths", value: paths(hosttools.Pgrep)}}, nil)
	return Script{Name: "stopping the multi-node test", File: "multinode-stop", Text: text, Timeout: 30 * time.Second}
}

// ParseMultiNodeStop reads the stop script's output: how many of the test's processes it still
// found after killing them.
func ParseMultiNodeStop(output string, code int) (int, error) {
	return markerCount(output, code, stopMarker, "LEFT", "the multi-node stop script")
}

// markerCount reads "MARKER WORD <n>" from a helper script's output; an ERROR line, a missing
// count or a failed exit status is an error.
func markerCount(output string, code int, marker, word, what string) (int, error) {
	n := -1
	for line := range strings.Lines(output) {
		rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), marker+" ")
		if !ok {
			continue
		}
		kind, val, _ := strings.Cut(rest, " ")
		switch kind {
		case "ERROR":
			return -1, fmt.Errorf("%s: %s", what, textcut.Head(val, 300))
		case word:
			v, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil || v < 0 {
				return -1, fmt.Errorf("%s: unreadable count %q", what, textcut.Head(val, 40))
			}
			n = v
		}
	}
	if code != 0 {
		return n, fmt.Errorf("%s exited %d: %s", what, code, textcut.Tail(strings.TrimSpace(output), 300))
	}
	if n < 0 {
		return -1, fmt.Errorf("%s printed no %s line: %s", what, word, textcut.Tail(strings.TrimSpace(output), 300))
	}
	return n, nil
}

// HostKeyFiles are the SSH host public keys a node's known_hosts line is built from.
var HostKeyFiles = []string{"/etc/ssh/ssh_host_ed25519_key.pub", "/etc/ssh/ssh_host_ecdsa_key.pub", "/etc/ssh/ssh_host_rsa_key.pub"}

// KnownHosts returns the known_hosts lines of a node at addr from the contents of its host
// public key files ("TYPE BASE64 [comment]"): the first node's ssh then accepts that node and no
// other. Each file must hold a valid key; at least one is required.
func KnownHosts(addr string, pubFiles [][]byte) (string, error) {
	if _, err := netip.ParseAddr(addr); err != nil {
		return "", fmt.Errorf("known_hosts: %q is not an IP address", addr)
	}
	var b strings.Builder
	for _, f := range pubFiles {
		f = bytes.TrimSpace(f)
		if len(f) == 0 {
			continue
		}
		key, _, _, rest, err := ssh.ParseAuthorizedKey(f)
		if err != nil || len(bytes.TrimSpace(rest)) > 0 {
			return "", fmt.Errorf("known_hosts: a host key file of %s is not one OpenSSH public key: %s", addr, textcut.Head(string(f), 80))
		}
		b.WriteString(addr + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))) + "\n")
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("known_hosts: %s has no SSH host key in %s", addr, strings.Join(HostKeyFiles, ", "))
	}
	return b.String(), nil
}
