package checks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

func init() {
	register(Entry{
		ID: result.ImageHygiene, Phase: PhaseImage, Family: "image", Order: 700, Judge: judgeImageHygiene,
		Doc:   "(with `image_hygiene = true` only; the bake's last entry) after the cleanup, read back as root: no line of the login user's or root's `authorized_keys` holds the key Packer logged in with, no `/etc/ssh/ssh_host_*`, `/etc/machine-id` an empty file, `/var/lib/dbus/machine-id` absent or a link to it, no `/var/lib/cloud/{instances,instance,data,sem}`, no non-empty shell history of root or the login user, `/etc/nvidia-imex/nodes_config.cfg` absent or holding only the placeholder 0.0.0.0 (a baked list of real addresses blocks every node it does not name). An answer that cannot be read (sudo refused, cut short) fails; a build key Packer did not reveal (SSH agent, password) warns",
		Reads: "`sudo -n /bin/sh -c …` probe of those paths",
	})
}

const hygieneExpected = "no build key in authorized_keys, no SSH host keys, an empty /etc/machine-id, no cloud-init instance state, no shell history, no IMEX node list of real addresses"

// judgeImageHygiene judges what image hygiene left, read back as root after the cleanup.
// Anything that cannot be read, or a cleanup that failed, fails: an image is only clean when
// every fact says so.
func judgeImageHygiene(f facts.Run, _ Target) result.Check {
	h := f.Hygiene
	c := result.Check{ID: result.ImageHygiene, Basis: BasisRule, Expected: hygieneExpected,
		Evidence: strings.TrimSpace(h.CleanupLog + "\n--- read back:\n" + h.State.Evidence)}
	fail := func(actual, msg string) result.Check {
		c.Status, c.Actual, c.Message = result.Fail, actual, msg
		return c
	}
	if !h.State.OK() {
		return fail("unreadable", "the image's state after image hygiene could not be read, so it is not known to be clean: "+h.State.Problem)
	}
	st := h.State.Value
	var bad []string
	for _, l := range st.Unreadable {
		bad = append(bad, "unreadable line "+strconv.Quote(l))
	}
	for _, k := range st.KeyFiles {
		if k.BuildLines > 0 {
			bad = append(bad, fmt.Sprintf("%s still holds the build key (%d line(s))", k.Path, k.BuildLines))
		}
	}
	if len(st.HostKeys) > 0 {
		bad = append(bad, "SSH host keys left: "+strings.Join(st.HostKeys, " "))
	}
	switch st.MachineID {
	case "size=0", "":
	case "absent":
		bad = append(bad, "/etc/machine-id is missing (it must be an empty file: machine-id(5))")
	default:
		bad = append(bad, "/etc/machine-id is not empty ("+st.MachineID+"): every instance would share its id")
	}
	if d := st.DBusMachineID; d != "" && d != "absent" && d != "link=/etc/machine-id" {
		bad = append(bad, "/var/lib/dbus/machine-id is left ("+d+")")
	}
	for _, p := range st.CloudState {
		bad = append(bad, "cloud-init instance state left: "+p)
	}
	for _, hf := range st.History {
		if hf.Size != 0 {
			bad = append(bad, "shell history left: "+hf.Path)
		}
	}
	if c := st.IMEXNodesConfig; c != nil && c.Count > 0 {
		bad = append(bad, bakedIMEXList(c.Path, c.Count, c.Addresses))
	}
	for _, m := range st.Missing {
		bad = append(bad, "no answer for "+m)
	}
	if len(bad) > 0 {
		return fail("left: "+textcut.Head(strings.Join(bad, "; "), 200), strings.Join(bad, "; "))
	}
	if h.CleanupExit != 0 {
		return fail(fmt.Sprintf("cleanup exit %d", h.CleanupExit), "the image hygiene script failed (exit "+strconv.Itoa(h.CleanupExit)+"): "+textcut.Tail(h.CleanupLog, 500))
	}
	if !h.BuildKeyKnown {
		c.Status, c.Actual = result.Warn, "clean; authorized_keys not judged"
		c.Message = "the key Packer logged in with is not known (ssh_agent_auth, a password, or an encrypted private key), so no authorized_keys line was removed: remove the build's key yourself, or log in with ssh_private_key_file or the builder's temporary key"
		return c
	}
	c.Status, c.Actual = result.Pass, "clean"
	return c
}
