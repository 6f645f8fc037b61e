package facts

// JobMemlock is the locked-memory limit where jobs run on a node, as opposed to a login
// shell's: the LimitMEMLOCK of the scheduler's and container runtime's systemd units (their
// jobs and containers inherit it) and the container runtimes' own defaults, which override it
// for containers.
type JobMemlock struct {
	// Units are slurmd.service, containerd.service and docker.service as systemd reports them,
	// loaded or not.
	Units Fact[[]UnitLimit]
	// Docker is /etc/docker/daemon.json's default-ulimits memlock.
	Docker Fact[RuntimeLimit]
	// Containerd is the RLIMIT_MEMLOCK of containerd's base runtime spec
	// (/etc/containerd/config.toml base_runtime_spec).
	Containerd Fact[RuntimeLimit]
}

// UnitLimit is one systemd unit's LimitMEMLOCK. Loaded is false for a unit that is not
// installed (LoadState not-found): it runs nothing and is not judged.
type UnitLimit struct {
	Unit   string
	Loaded bool
	Limit  Memlock
}

// RuntimeLimit is a container runtime's default memlock limit for containers. Present is
// false when the runtime has no configuration file at all; Set is false when its
// configuration sets no memlock limit (containers then inherit the runtime unit's).
type RuntimeLimit struct {
	// Config is the file the limit was read from.
	Config  string
	Present bool
	Set     bool
	// Soft and Hard are the limits; a limit of RLIM_INFINITY is Unlimited.
	Soft, Hard Memlock
}
