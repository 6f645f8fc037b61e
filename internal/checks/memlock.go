package checks

import (
	"fmt"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

func init() {
	register(Entry{
		ID: result.Memlock, Phase: PhaseHost, Family: "kernel", Order: 300, Judge: judgeMemlock,
		Doc:   "a new login of the login user gets an `unlimited` locked-memory limit (collectives pin large buffers)",
		Reads: "the limits files as pam_limits applies them: `limits.conf`, then `limits.d/*.conf` by name, user over group over `*`, in sshd's PAM stack; where no file sets it, the lower of PID 1's and sshd's limit (`/proc/<pid>/limits`); the SSH session's own `ulimit -l` is evidence, and on a first boot (a fresh login) a limited session fails too",
	})
}

// memlockFix is what to write so that every login, whatever the libpam build, gets it.
const memlockFix = "set `* soft memlock unlimited` and `* hard memlock unlimited` in a file of /etc/security/limits.d (the EFA installer's 01_efa.conf does)"

// judgeMemlock judges the locked-memory limit a new login session gets (collectives pin large
// buffers, so it must be unlimited), as pam_limits applies the limits files now on the host.
// The probe's own session is not the verdict in a bake: it opened before any layer ran, so a
// layer's limits file is invisible to it. On a first boot the session is a fresh login, and
// a limited session fails too.
func judgeMemlock(f facts.Run, t Target) result.Check {
	h := f.Host
	id := result.Memlock
	const expected = "unlimited for a new login"
	if t.LoginUnjudged != "" {
		return check(id, result.Warn, "", expected, "not judged", t.LoginUnjudged, "")
	}
	lm, session := h.LoginMemlock, h.Memlock
	sessionEv := "this SSH session: unreadable (" + session.Problem + ")"
	if session.OK() {
		sessionEv = "this SSH session: " + session.Value.String()
		if !t.SessionIsLogin {
			sessionEv += " (fixed when the session opened, before the layers ran)"
		}
	}
	if !lm.OK() {
		return check(id, result.Fail, BasisRule, expected, "unreadable",
			"the memlock limit of a new login could not be worked out: "+lm.Problem, sessionEv+"\n"+lm.Evidence)
	}
	v := lm.Value
	ev := strings.Join(append([]string{fmt.Sprintf("a new login of %s: soft %s, hard %s, from %s", v.User, v.Soft, v.Hard, v.From)}, append(v.Notes, sessionEv)...), "\n")
	actual := fmt.Sprintf("%s for a new login of %s", v.Soft, v.User)
	if !v.Soft.Unlimited {
		return check(id, result.Fail, BasisRule, expected, actual,
			fmt.Sprintf("a new login of %s gets locked memory %s (from %s): collectives pin large buffers; %s", v.User, v.Soft, v.From, memlockFix), ev)
	}
	if t.SessionIsLogin && session.OK() && !session.Value.Unlimited {
		return check(id, result.Fail, BasisRule, expected, session.Value.String()+" for this login",
			fmt.Sprintf("the limits files give a login unlimited locked memory, but this fresh login has %s: something outside pam_limits lowers it (sshd's UsePAM, its unit's LimitMEMLOCK, a PAM jump over pam_limits); %s", session.Value, memlockFix), ev)
	}
	return check(id, result.Pass, BasisRule, expected, actual, "", ev)
}
