package probe

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bundle"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/pamlimits"
)

// Section names of the login memlock commands.
const (
	sectionLoginUser   = "host.login_user"
	sectionLimitsFiles = "host.limits_files"
	sectionPAMFiles    = "host.pam_files"
	sectionLimitsBase  = "host.limits_base"
)

// limitsFilesShell prints limits.conf and limits.d/*.conf; pamFilesShell the PAM
// configuration, so that the parser can follow sshd's includes (commands/dump-files.sh).
var (
	limitsFilesShell = commandShell("dump-files.sh", scriptVar{name: "globs", value: pamlimits.ConfPath + ` ` + pamlimits.Dir + `/*.conf`})
	pamFilesShell    = commandShell("dump-files.sh", scriptVar{name: "globs", value: `/etc/pam.d/*`})
)

// limitsBaseShell prints the memlock limits a login starts from (commands/limits-base.sh).
var limitsBaseShell = commandShell("limits-base.sh")

// loginUserShell prints the login user's name, uid, gid, gids and group names
// (commands/login-user.sh). An empty user is the probe's own.
func loginUserShell(user string) string {
	return commandShell("login-user.sh", scriptVar{name: "user", value: user})
}

// loginMemlockCommands are the read-only commands behind facts.LoginMemlock.
func loginMemlockCommands(o Options) []bundle.Command {
	t := o.timeout()
	return []bundle.Command{
		{Name: sectionLoginUser, Shell: loginUserShell(o.LoginUser), Timeout: t},
		{Name: sectionLimitsFiles, Shell: limitsFilesShell, Timeout: t},
		{Name: sectionPAMFiles, Shell: pamFilesShell, Timeout: t},
		{Name: sectionLimitsBase, Shell: limitsBaseShell, Timeout: t},
	}
}

// limitsBase is what the base section says.
type limitsBase struct {
	initSoft, initHard pamlimits.Value
	sshdPID            string
	sshdSoft, sshdHard pamlimits.Value
	hasSSHD            bool
}

func parseLimitsBase(out string) (limitsBase, error) {
	var b limitsBase
	hasInit := false
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		kind, rest, _ := strings.Cut(line, " ")
		var err error
		switch kind {
		case "init":
			b.initSoft, b.initHard, err = pamlimits.ProcLimit(rest)
			hasInit = true
		case "sshd":
			pid, limits, _ := strings.Cut(rest, " ")
			if _, perr := strconv.Atoi(pid); perr != nil {
				return b, fmt.Errorf("sshd pid %q", pid)
			}
			b.sshdPID, b.hasSSHD = pid, true
			b.sshdSoft, b.sshdHard, err = pamlimits.ProcLimit(limits)
		default:
			return b, fmt.Errorf("unexpected line %q", line)
		}
		if err != nil {
			return b, fmt.Errorf("%s: %w", kind, err)
		}
	}
	if !hasInit {
		return b, fmt.Errorf("/proc/1/limits has no \"Max locked memory\" line")
	}
	return b, nil
}

// parseLoginMemlock works out the memlock limit a new SSH login of the user gets: pam_limits
// in sshd's session stack applies the limits files over what the session starts from. Where
// no file sets a limit, the start is PID 1's limit (Debian's pam_limits) or sshd's (upstream):
// which one a host's libpam does is not visible, so the lower of the two is taken.
func parseLoginMemlock(sections map[string]bundle.Section) facts.Fact[facts.LoginMemlock] {
	ev := evidence(sections, sectionLoginUser, sectionLimitsFiles, sectionLimitsBase)
	read := func(name string) (string, string) {
		s, problem := get(sections, name)
		return s.Output, problem
	}
	var out [4]string
	for i, name := range []string{sectionLoginUser, sectionLimitsFiles, sectionPAMFiles, sectionLimitsBase} {
		var problem string
		if out[i], problem = read(name); problem != "" {
			return facts.Unread[facts.LoginMemlock](problem, ev)
		}
	}
	unread := func(format string, a ...any) facts.Fact[facts.LoginMemlock] {
		return facts.Unread[facts.LoginMemlock](fmt.Sprintf(format, a...), ev)
	}
	user, err := pamlimits.ParseUser(out[0])
	if err != nil {
		return unread("%s: %v", sectionLoginUser, err)
	}
	files, err := pamlimits.ParseFiles(out[1])
	if err != nil {
		return unread("%s: %v", sectionLimitsFiles, err)
	}
	pamFiles, err := pamlimits.ParseFiles(out[2])
	if err != nil {
		return unread("%s: %v", sectionPAMFiles, err)
	}
	base, err := parseLimitsBase(out[3])
	if err != nil {
		return unread("%s: %v", sectionLimitsBase, err)
	}
	stack, err := pamlimits.SessionLimits(pamFiles, "sshd")
	if err != nil {
		return unread("a new SSH login's limits cannot be worked out: %v", err)
	}
	lm, problem := loginMemlock(user, files, stack, base)
	if problem != "" {
		return unread("%s", problem)
	}
	return facts.Read(lm, ev)
}

// start is one limit a session may start from.
type start struct {
	soft, hard pamlimits.Value
	what       string
}

func loginMemlock(u pamlimits.User, files []pamlimits.File, stack pamlimits.Stack, base limitsBase) (facts.LoginMemlock, string) {
	lm := facts.LoginMemlock{User: u.Name}
	var sshd []start
	if base.hasSSHD {
		sshd = []start{{base.sshdSoft, base.sshdHard, "the limit it inherits from sshd (pid " + base.sshdPID + ")"}}
	}
	initStart := start{base.initSoft, base.initHard, "PID 1's limit, which Debian's and Ubuntu's pam_limits start every login from"}
	var r pamlimits.Result
	starts, needSSHD := sshd, true
	switch {
	case !stack.Applies:
		lm.Notes = append(lm.Notes, "pam_limits is not in sshd's PAM session stack: limits files do not apply to SSH logins")
	default:
		lm.Notes = append(lm.Notes, "pam_limits runs at "+stack.From.String())
		o := pamlimits.Options{RootOnlyLiteral: true}
		setAll := false
		for _, a := range stack.Args {
			switch {
			case strings.HasPrefix(a, "conf="):
				o.Conf = strings.TrimPrefix(a, "conf=")
			case a == "set_all":
				setAll = true
			}
		}
		if o.Conf != "" && o.Conf != pamlimits.ConfPath {
			return lm, fmt.Sprintf("pam_limits reads conf=%s, which the probe does not read: the limit a login gets is unknown", o.Conf)
		}
		r = pamlimits.Memlock(files, u, o)
		for _, s := range r.Skipped {
			lm.Notes = append(lm.Notes, "pam_limits skips the invalid line "+s.String())
		}
		switch {
		case r.NoLimits != nil:
			lm.Notes = append(lm.Notes, "pam_limits sets no limit at all for this user: "+r.NoLimits.String())
			r = pamlimits.Result{}
		case setAll:
			starts, needSSHD = []start{initStart}, false
		default:
			starts = append([]start{initStart}, sshd...)
		}
	}
	needStart := r.Soft == nil || r.Hard == nil
	if needStart && (len(starts) == 0 || needSSHD && !base.hasSSHD) {
		return lm, "no limits file sets memlock for " + u.Name + " and no sshd was found to read the limit a login inherits (set memlock in /etc/security/limits.d)"
	}
	if !needStart {
		starts = []start{{}}
	}
	var lowest pamlimits.Value
	first := true
	for _, s := range starts {
		soft, hard := s.soft, s.hard
		from := s.what
		if r.Soft != nil {
			soft, from = r.Soft.Value, r.Soft.From.String()
		}
		if r.Hard != nil {
			hard = r.Hard.Value
		}
		if hard.Less(soft) {
			// setup_limits lowers the soft limit to the hard one.
			soft = hard
			if r.Hard != nil {
				from = r.Hard.From.String() + " (the hard limit caps the soft one)"
			} else {
				from = s.what + " (its hard limit caps the soft one)"
			}
		}
		if first || soft.Less(lowest) {
			lowest = soft
			lm.Soft, lm.Hard, lm.From = memlock(soft), memlock(hard), from
			first = false
		}
	}
	if needStart && len(starts) > 1 {
		lm.Notes = append(lm.Notes, fmt.Sprintf("no limits file sets both memlock limits for %s: the lower of PID 1's (%s) and sshd's (%s) is taken, since which one libpam starts from depends on its build",
			u.Name, base.initSoft, base.sshdSoft))
	}
	return lm, ""
}

func memlock(v pamlimits.Value) facts.Memlock {
	if v.Infinite {
		return facts.Memlock{Unlimited: true}
	}
	return facts.Memlock{KiB: v.Bytes / 1024}
}
