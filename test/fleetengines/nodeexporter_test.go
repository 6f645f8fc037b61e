package fleetengines

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/bom"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodecheck"
	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
)

const (
	nodeExporter = "/usr/bin/prometheus-node-exporter"
	promtool     = "/usr/bin/promtool"
	curl         = "/usr/bin/curl"
	// exporterAddr is inside the host's network namespace: nothing else listens there.
	exporterAddr = "127.0.0.1:9100"
)

// TestNodeExporterTextfile: Debian's real node_exporter, with its textfile collector pointed at
// the directory the node check writes to, scraped over the namespace's loopback after a
// passing and after a failing run of the real binary; the scrape shows the runs' verdicts,
// the collector reports no error, and `promtool check metrics` finds nothing to say about the
// file or the scrape.
func TestNodeExporterTextfile(t *testing.T) {
	needEngines(t, nodeExporter, promtool, curl)
	cfg := nodeconf.Config{Action: nodeconf.ActionReport, BOMPath: bom.DefaultPath, OutDir: nodeconf.DefaultOutDir,
		Textfile: nodeconf.DefaultTextfile, Timeout: 2 * time.Minute, CheckTimeout: time.Minute, Scontrol: nodeconf.DefaultScontrol}
	h := bootHost(t, imageLayer(t, cfg))
	h.writeBOM()
	h.startNodeExporter(filepath.Join(h.merged, filepath.Dir(nodeconf.DefaultTextfile)))

	for _, c := range []struct {
		name, gpus, result string
		exit               int
		want               []string
	}{
		{"passing", "", "pass", 0, []string{`dlami_node_check{check="gpu",status="pass"} 1`, `dlami_node_check{check="first-boot-packages",status="pass"} 1`}},
		{"failing", "7", "fail", 1, []string{`dlami_node_check{check="gpu",status="fail"} 0`, `dlami_node_check{check="first-boot-packages",status="pass"} 1`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h.knob("gpu-count", c.gpus)
			before := time.Now().Unix()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := h.exec(ctx, true, nil, "", nodeconf.BinaryPath, "--mode", string(nodeconf.ModeBoot), "--config", nodeconf.ConfigPath)
			if err != nil || r.code != c.exit {
				t.Fatalf("node check: exit %d (%v), want %d\n%s", r.code, err, c.exit, r)
			}
			scrape := h.scrape(t)
			want := append(c.want, `node_textfile_scrape_error 0`,
				fmt.Sprintf(`dlami_node_check_info{build="fleetengines",plugin_version=%q,result=%q} 1`, versionOf(t, h), c.result))
			for _, w := range want {
				if !strings.Contains(scrape, "\n"+w+"\n") {
					t.Errorf("the scrape lacks %q:\n%s", w, grepLines(scrape, "dlami_"))
				}
			}
			// The run's time as node_exporter serves it (a float in the exposition).
			ts := metricValue(scrape, nodecheck.MetricLastRun)
			if v, err := strconv.ParseFloat(ts, 64); err != nil || int64(v) < before || int64(v) > time.Now().Unix() {
				t.Errorf("%s = %q, want the run's time (after %d)", nodecheck.MetricLastRun, ts, before)
			}
			promtoolClean(t, "the textfile", h.readFile(nodeconf.DefaultTextfile))
			promtoolClean(t, "the scrape", scrape)
		})
	}

	t.Run("promtool judges", func(t *testing.T) {
		// The check above could fail: promtool does complain about a metric without HELP.
		out, code := promtoolCheck(t, "dlami_node_check{check=\"gpu\",status=\"pass\"} 1\n")
		if code == 0 || !strings.Contains(out, "no help text") {
			t.Errorf("promtool passed a metric without HELP: exit %d, %q", code, out)
		}
	})
}

// startNodeExporter runs node_exporter in the host's namespaces (this machine's binary, not
// chrooted: the collector reads dir through the namespace's mounts) until the test ends.
func (h *host) startNodeExporter(dir string) {
	h.t.Helper()
	cmd := exec.Command("/usr/bin/nsenter", "-t", strconv.Itoa(h.pid), "-m", "-u", "-n", "-p", "-i", "--", nodeExporter,
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir,
		"--web.listen-address="+exporterAddr)
	logf, err := os.Create(filepath.Join(h.state, "node-exporter.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(exited) }()
	h.t.Cleanup(func() {
		_ = cmd.Process.Kill() // nsenter; node_exporter itself dies with the namespaces
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := h.exec(ctx, false, nil, "", curl, "-fsS", "-o", "/dev/null", "http://"+exporterAddr+"/metrics")
		cancel()
		if err == nil && r.code == 0 {
			return
		}
		select {
		case <-exited:
			h.t.Fatalf("node_exporter exited:\n%s", readFile(filepath.Join(h.state, "node-exporter.log")))
		default:
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("node_exporter did not answer on %s within 30s (%v %s):\n%s", exporterAddr, err, r, readFile(filepath.Join(h.state, "node-exporter.log")))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// scrape is node_exporter's /metrics, fetched over the namespace's loopback.
func (h *host) scrape(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.exec(ctx, false, nil, "", curl, "-fsS", "http://"+exporterAddr+"/metrics")
	if err != nil || r.code != 0 {
		t.Fatalf("scraping node_exporter: %v\n%s", err, r)
	}
	return r.stdout
}

// promtoolCheck runs `promtool check metrics` on an exposition: its output and exit status
// (0 clean, 3 lint problems, 1 unparsable).
func promtoolCheck(t *testing.T, exposition string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("promtool: %v", err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func promtoolClean(t *testing.T, what, exposition string) {
	t.Helper()
	if out, code := promtoolCheck(t, exposition); code != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("promtool check metrics on %s: exit %d\n%s", what, code, out)
	}
}

// metricValue is the value of an unlabelled sample in an exposition.
func metricValue(exposition, name string) string {
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// versionOf is the binary's version as it prints it (the info metric's plugin_version).
func versionOf(t *testing.T, h *host) string {
	t.Helper()
	out := strings.TrimSpace(h.must(nodeconf.BinaryPath, "--version"))
	v, ok := strings.CutPrefix(out, "dlami-node-check ")
	if !ok {
		t.Fatalf("--version printed %q", out)
	}
	return v
}
