package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/facts"
	"github.com/dlami-bake/packer-plugin-dlami/internal/host"
	"github.com/dlami-bake/packer-plugin-dlami/internal/probe"
	"github.com/dlami-bake/packer-plugin-dlami/internal/profile"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
)

// Node is one instance of a verification across nodes: the host to reach it and who it is.
type Node struct {
	Host host.Host
	// InstanceID, PrivateIP (where the other nodes reach it), InstanceType, SubnetID and
	// PlacementGroup say which instance it is; EFA how many EFA interfaces EC2 describes on it.
	InstanceID, PrivateIP, InstanceType, SubnetID, PlacementGroup string
	EFA                                                           int
	// NCCL is the figures of the node's own NCCL test in its first-boot verification, for the
	// report's plot of each node; nil when it ran none.
	NCCL *result.NCCLFigures
}

// MultiNodeOptions configure the NCCL test across a verification's nodes. Common.Checks
// carries the test's settings (MultiNode) and Common.Launch the launch's security groups.
type MultiNodeOptions struct {
	Common
	// Nodes are the nodes, the first running mpirun; each passed its own first-boot
	// verification.
	Nodes []Node
	// NotRun, when set, says why the test does not run (a node failed its own verification):
	// the check is reported skipped with it.
	NotRun string
	// Launch is the launch, for the report; its Nodes are filled in here.
	Launch *report.Launch
	// Outcome, when set, receives the nccl-multinode check's status once the run ends (""
	// when it was never judged), or imex-domain's and nccl-mnnvl's where those ran and
	// nccl-multinode passed: a caller says and tags a test across nodes only when it passed, not when
	// skip_checks or warn_checks made it a skip or a warning.
	Outcome *result.Status
}

// multiNodeKeyTag starts the comment of the test's key in authorized_keys.
const multiNodeKeyTag = "dlami-multinode-"

// MultiNode runs the NCCL test across the nodes and writes its report: a temporary SSH key lets
// the first node's Open MPI start the ranks of the others (it is removed from every node on
// every ending, and never reaches an image: the nodes run the image, they are not baked), each
// node's kernel log is read around the test, and whatever the test leaves running (a stalled
// collective waits forever) is killed on every node.
func MultiNode(ctx context.Context, ui UI, o MultiNodeOptions) error {
	if len(o.Nodes) < 2 {
		return fmt.Errorf("the multi-node test needs 2 or more nodes, got %d", len(o.Nodes))
	}
	b := newBake(o.Nodes[0].Host, ui, Options{Common: o.Common, Validate: true})
	typ := o.Nodes[0].InstanceType
	b.target = checks.Target{Checks: o.Checks, InstanceType: typ, InstanceTypeSource: "launch", Launch: o.Common.Launch}
	if p, ok := profile.Lookup(typ); ok {
		b.target.Profile = &p
	}
	mn := &multiNode{b: b, o: o}
	mn.b.run.MultiNode = facts.MultiNodeRun{Setting: fmt.Sprintf("nodes = %d", len(o.Nodes))}
	if o.Launch != nil {
		l := *o.Launch
		b.rep.Launch = &l
	}
	b.plan = plan{
		checkIDs: checks.IDs(checks.PhaseMultiNode),
		steps:    []func(context.Context) error{mn.prepare, mn.test, b.judged("the multi-node test")},
	}
	err := b.withReports(ctx, func(ctx context.Context) error {
		defer mn.cleanup(ctx)
		return b.plan.run(ctx)
	})
	if o.Outcome != nil {
		*o.Outcome = mn.outcome()
	}
	return err
}

// outcome is the test's status for the caller: nccl-multinode's, unless it passed and the IMEX
// domain across the trays was judged, or the second run over multi-node NVLink ran, without
// passing: then theirs (the test across the nodes passed only when all of them did).
func (m *multiNode) outcome() result.Status {
	st := m.b.checkOf(result.NCCLMultiNode).Status
	if st == result.Pass && m.b.run.MultiNode.IMEXDomain.Ran {
		st = m.b.checkOf(result.IMEXDomain).Status
	}
	if st == result.Pass && m.ranMNNVL {
		st = m.b.checkOf(result.NCCLMNNVL).Status
	}
	return st
}

// multiNode is one run of the test across nodes.
type multiNode struct {
	b *Bake
	o MultiNodeOptions
	// dirs are each node's staging folder; keyed is true for the nodes whose authorized_keys
	// got the test's key (or may have); tag marks the key's lines.
	dirs  []string
	keyed []bool
	tag   string
	// started is set when the test was started, stopped once its leftovers were stopped on
	// every node; ranMNNVL once the second run, over multi-node NVLink, was started.
	started, stopped, ranMNNVL bool
	mu                         sync.Mutex
}

// eachNode runs f for every node at the same time and returns the first error in node order.
func (m *multiNode) eachNode(ctx context.Context, f func(ctx context.Context, i int, n Node) error) error {
	errs := make([]error, len(m.o.Nodes))
	var wg sync.WaitGroup
	for i, n := range m.o.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(ctx, i, n) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bound is a context for one command on a node.
func (m *multiNode) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(m.b.opt.CheckTimeout, time.Minute))
}

// prepare gives every node a staging folder, reads what each calls itself and its host keys,
// and installs the test's key: its private half on the first node, its public half in every
// node's authorized_keys, and the nodes' host keys in the first node's known_hosts.
func (m *multiNode) prepare(ctx context.Context) error {
	b, mn := m.b, &m.b.run.MultiNode
	nodes := m.o.Nodes
	mn.Nodes = make([]facts.MultiNodeNode, len(nodes))
	for i, n := range nodes {
		mn.Nodes[i] = facts.MultiNodeNode{InstanceID: n.InstanceID, Address: n.PrivateIP, InstanceType: n.InstanceType,
			SubnetID: n.SubnetID, PlacementGroup: n.PlacementGroup, EFA: n.EFA, Left: -1}
	}
	if m.o.NotRun != "" {
		mn.NotRun = m.o.NotRun
		return nil
	}
	b.stage("multi-node test: preparing the nodes")
	m.dirs, m.keyed = make([]string, len(nodes)), make([]bool, len(nodes))
	known := make([]string, len(nodes))
	err := m.eachNode(ctx, func(ctx context.Context, i int, n Node) error {
		cctx, cancel := m.bound(ctx)
		defer cancel()
		dir, err := n.Host.MakeTempDir(cctx, b.opt.RemoteFolder, "dlami-multinode")
		if err != nil {
			return fmt.Errorf("node %d (%s): creating a staging folder in %s: %w", i+1, n.InstanceID, b.opt.RemoteFolder, err)
		}
		m.mu.Lock()
		m.dirs[i] = dir
		m.mu.Unlock()
		name, err := n.Host.ReadFile(cctx, "/proc/sys/kernel/hostname")
		if err == nil {
			mn.Nodes[i].HostName = strings.TrimSpace(string(name))
		}
		var pubs [][]byte
		for _, f := range probe.HostKeyFiles {
			data, err := n.Host.ReadFile(cctx, f)
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return fmt.Errorf("node %d (%s): reading its SSH host key %s: %w", i+1, n.InstanceID, f, err)
			default:
				pubs = append(pubs, data)
			}
		}
		if known[i], err = probe.KnownHosts(n.PrivateIP, pubs); err != nil {
			return fmt.Errorf("node %d (%s): %w", i+1, n.InstanceID, err)
		}
		return nil
	})
	// The first node's folder is the run's staging folder: finish removes it on every ending.
	b.workDir = m.dirs[0]
	if err != nil {
		return m.problem(ctx, err)
	}
	priv, line, err := newTestKey()
	if err != nil {
		return m.problem(ctx, err)
	}
	m.tag = strings.TrimSpace(line[strings.LastIndexByte(line, ' '):])
	cctx, cancel := m.bound(ctx)
	defer cancel()
	if err := nodes[0].Host.Upload(cctx, m.dirs[0]+"/id_ed25519", strings.NewReader(string(priv))); err != nil {
		return m.problem(ctx, fmt.Errorf("node 1 (%s): uploading the test's key: %w", nodes[0].InstanceID, err))
	}
	if err := nodes[0].Host.Upload(cctx, m.dirs[0]+"/known_hosts", strings.NewReader(strings.Join(known, ""))); err != nil {
		return m.problem(ctx, fmt.Errorf("node 1 (%s): uploading the nodes' host keys: %w", nodes[0].InstanceID, err))
	}
	add, err := probe.MultiNodeKeyScript(true, line, m.tag)
	if err != nil {
		return m.problem(ctx, err)
	}
	err = m.eachNode(ctx, func(ctx context.Context, i int, n Node) error {
		m.mu.Lock()
		m.keyed[i] = true
		m.mu.Unlock()
		out, err := b.runJobOn(ctx, n.Host, m.dirs[i], add, false)
		if err == nil {
			_, err = probe.ParseMultiNodeKey(out.output, out.code)
		}
		if err != nil {
			return fmt.Errorf("node %d (%s): %w", i+1, n.InstanceID, err)
		}
		return nil
	})
	if err != nil {
		return m.problem(ctx, err)
	}
	return nil
}

// problem records why the test could not run, and returns ctx's error when the run was
// cancelled (the check then stays unjudged), else nil: a test that could not run is a fact.
func (m *multiNode) problem(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m.b.run.MultiNode.Problem = err.Error()
	return nil
}

// test runs the NCCL test on the first node, the kernel logs read on every node before and
// after it, then stops whatever it left on every node and judges.
func (m *multiNode) test(ctx context.Context) error {
	b, mn := m.b, &m.b.run.MultiNode
	if mn.NotRun != "" || mn.Problem != "" {
		b.judge(checks.PhaseMultiNode, 0)
		if mn.NotRun != "" {
			// Not run because a node failed: the run as a whole did not pass.
			return verdict("the multi-node test did not run: %s", mn.NotRun)
		}
		return nil
	}
	o := b.opt.Checks.MultiNode
	var hosts []string
	for _, n := range m.o.Nodes {
		hosts = append(hosts, n.PrivateIP)
	}
	// On a multi-node NVLink type the all-reduce runs twice: over EFA with MNNVL off (NCCL's
	// default would take the NVLink domain, and nccl-multinode judges EFA), then with MNNVL
	// required (nccl-mnnvl).
	mnnvl, _, known := b.target.MultiNodeNVLink()
	mnnvl = mnnvl && known
	efaRun := o
	if mnnvl {
		efaRun = withEnv(o, checks.MNNVLEnvKey, "0")
	} else {
		mn.MNNVL.NotRun = "the nodes share no NVLink domain across trays"
	}
	script, err := probe.MultiNodeScript(efaRun, o.RanksPerNode, hosts, m.dirs[0])
	var nvlScript probe.Script
	if err == nil && mnnvl {
		nvlScript, err = probe.MultiNodeScript(withEnv(o, checks.MNNVLEnvKey, "1"), o.RanksPerNode, hosts, m.dirs[0])
	}
	if err != nil {
		mn.Problem = "bad multi_node settings: " + err.Error()
		b.judge(checks.PhaseMultiNode, 0)
		return nil
	}
	if err := m.readLogs(ctx, true); err != nil {
		return err
	}
	b.stage("multi-node test")
	m.started = true
	b.ui.Say(fmt.Sprintf("dlami: running the NCCL all-reduce across %d nodes (%s), at most %s", len(hosts), strings.Join(hosts, ", "), script.Timeout))
	out, err := b.runJobOn(ctx, m.o.Nodes[0].Host, m.dirs[0], script, true)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	mn.NCCL = probe.ParseNCCLRun(out.output, out.code, out.timedOut, script.Timeout)
	mn.NCCL.Took = out.took
	if err != nil {
		mn.NCCL.Problem = err.Error()
	}
	fig := ncclFigures(mn.NCCL)
	b.update(func(r *report.Report) { r.NCCL = &fig })
	m.stop(ctx)
	took := out.took
	if mnnvl {
		if err := m.imexDomain(ctx); err != nil {
			return err
		}
		if why := m.imexBlocksMNNVL(); why != "" {
			mn.MNNVL.NotRun = why
		} else if took, err = m.testMNNVL(ctx, nvlScript, hosts, took); err != nil {
			return err
		}
	}
	if err := m.readLogs(ctx, false); err != nil {
		return err
	}
	m.launchNodes(took)
	b.judge(checks.PhaseMultiNode, took)
	return nil
}

// testMNNVL runs the all-reduce a second time with NCCL_MNNVL_ENABLE=1 (nccl-mnnvl) and stops
// what it left on every node; it returns the time of both runs.
func (m *multiNode) testMNNVL(ctx context.Context, script probe.Script, hosts []string, took time.Duration) (time.Duration, error) {
	b, mn := m.b, &m.b.run.MultiNode
	b.stage("multi-node test over multi-node NVLink")
	m.stopped, m.ranMNNVL = false, true
	b.ui.Say(fmt.Sprintf("dlami: running the NCCL all-reduce across %d nodes again over multi-node NVLink (%s=1), at most %s", len(hosts), checks.MNNVLEnvKey, script.Timeout))
	out, err := b.runJobOn(ctx, m.o.Nodes[0].Host, m.dirs[0], script, true)
	if ctx.Err() != nil {
		return took, ctx.Err()
	}
	mn.MNNVL = probe.ParseNCCLRun(out.output, out.code, out.timedOut, script.Timeout)
	mn.MNNVL.Took = out.took
	if err != nil {
		mn.MNNVL.Problem = err.Error()
	}
	m.stop(ctx)
	return took + out.took, nil
}

// withEnv is o with key=value over whatever multi_node.env sets for it (a copy: o's map is
// left alone).
func withEnv(o settings.MultiNode, key, value string) settings.MultiNode {
	env := maps.Clone(o.Env)
	if env == nil {
		env = map[string]string{}
	}
	env[key] = value
	o.Env = env
	return o
}

// readLogs reads every node's kernel log: before the test (the mark) or after it.
func (m *multiNode) readLogs(ctx context.Context, before bool) error {
	mn := &m.b.run.MultiNode
	_ = m.eachNode(ctx, func(ctx context.Context, i int, n Node) error {
		log, journal, err := probe.KernelLogAndJournal(ctx, n.Host, m.b.probeOptions())
		if err != nil {
			log, journal = facts.Unread[facts.KernelLog](err.Error(), ""), facts.Unread[facts.KernelJournal](err.Error(), "")
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if before {
			if log.OK() {
				mn.Nodes[i].Mark = &facts.Mark{Position: facts.EndOf(log, journal), During: "during the multi-node NCCL test"}
			}
			return nil
		}
		mn.Nodes[i].KernelLog, mn.Nodes[i].KernelJournal = log, journal
		return nil
	})
	return ctx.Err()
}

// stop kills what the test left on every node (ranks, Open MPI's daemons) and counts what is
// left; it runs after every test, finished or not: a killed mpirun does not take the other
// nodes' ranks with it.
func (m *multiNode) stop(ctx context.Context) {
	mn := &m.b.run.MultiNode
	m.stopped = true
	script := probe.MultiNodeStopScript()
	_ = m.eachNode(context.WithoutCancel(ctx), func(ctx context.Context, i int, n Node) error {
		out, err := m.b.runJobOn(ctx, n.Host, m.dirs[i], script, false)
		left := -1
		if err == nil {
			left, err = probe.ParseMultiNodeStop(out.output, out.code)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		mn.Nodes[i].Left = left
		if err != nil {
			mn.Nodes[i].StopProblem = err.Error()
		}
		return nil
	})
}

// launchNodes puts every node, with what it called itself and its time in the test, in the
// report's launch.
func (m *multiNode) launchNodes(took time.Duration) {
	m.b.update(func(r *report.Report) {
		if r.Launch == nil {
			r.Launch = &report.Launch{InstanceType: m.o.Nodes[0].InstanceType}
		}
		r.Launch.Nodes = nil
		for i, n := range m.o.Nodes {
			r.Launch.Nodes = append(r.Launch.Nodes, report.LaunchNode{InstanceID: n.InstanceID, PrivateIP: n.PrivateIP, InstanceType: n.InstanceType,
				SubnetID: n.SubnetID, PlacementGroup: n.PlacementGroup, EFA: n.EFA, HostName: m.b.run.MultiNode.Nodes[i].HostName, TestSeconds: took.Seconds(), NCCL: n.NCCL})
		}
	})
}

// cleanup takes the test's key out of every node's authorized_keys and removes the staging
// folders, on every ending, detached from a cancellation and bounded.
func (m *multiNode) cleanup(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if len(m.dirs) == 0 {
		return
	}
	if m.started && !m.stopped {
		// Cancelled while the test ran: its ranks may still run on every node.
		m.stop(ctx)
	}
	remove, err := probe.MultiNodeKeyScript(false, "x "+m.tag, m.tag)
	_ = m.eachNode(ctx, func(ctx context.Context, i int, n Node) error {
		if m.dirs[i] == "" {
			return nil
		}
		if m.keyed[i] && err == nil {
			out, rerr := m.b.runJobOn(ctx, n.Host, m.dirs[i], remove, false)
			left := -1
			if rerr == nil {
				left, rerr = probe.ParseMultiNodeKey(out.output, out.code)
			}
			if rerr != nil || left != 0 {
				m.b.ui.Error(fmt.Sprintf("dlami: node %d (%s): the multi-node test's key may still be in authorized_keys (%v; %d lines left); the instance is terminated next", i+1, n.InstanceID, rerr, left))
			}
		}
		if i == 0 {
			return nil // the first node's folder is the run's staging folder: finish removes it
		}
		cctx, cancel := m.bound(ctx)
		defer cancel()
		if err := n.Host.RemoveAll(cctx, m.dirs[i]); err != nil {
			m.b.ui.Error(fmt.Sprintf("dlami: node %d (%s): removing %s: %v", i+1, n.InstanceID, m.dirs[i], err))
		}
		return nil
	})
}

// newTestKey makes the test's own SSH key: the private key in OpenSSH's format and the public
// key line, its comment a tag unique to this run.
func newTestKey() (priv []byte, line string, err error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("making the multi-node test's key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		return nil, "", fmt.Errorf("making the multi-node test's key: %w", err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", fmt.Errorf("making the multi-node test's key: %w", err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tag := fmt.Sprintf("%s%x", multiNodeKeyTag, suffix)
	return pem.EncodeToMemory(block), strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub))) + " " + tag, nil
}
