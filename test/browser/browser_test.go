// Package browser opens the HTML report in headless Chromium and asserts what a person sees.
package browser

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dlami-bake/packer-plugin-dlami/internal/parse/nccltests"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
)

// chromium is the browser: DLAMI_CHROMIUM, else Debian's package. Without it the test skips
// with the reason; with CI=true it fails (install-deps installs it).
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("DLAMI_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		msg := fmt.Sprintf("no Chromium at %s (%v): run test/browser/install-deps (apt-get install chromium) or set DLAMI_CHROMIUM", path, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return path
}

// browse starts a fresh headless Chromium (its own profile, nothing from the network) and
// returns a tab.
func browse(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1600),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	tab, tcancel := chromedp.NewContext(actx)
	t.Cleanup(tcancel)
	return tab
}

// figures are an NCCL run's report figures from a real nccl-tests output in testdata.
func figures(t *testing.T, name string, floor float64) *result.NCCLFigures {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := nccltests.ParseString(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) < 10 {
		t.Fatalf("%s: %d rows, want a sweep of message sizes", name, len(res.Rows))
	}
	f := &result.NCCLFigures{NCCLVersion: res.NCCLVersion, AvgBusBWGBps: res.AvgBusBW, OutOfBounds: res.OutOfBounds}
	if floor > 0 {
		f.BusBWFloorGBps = &floor
	}
	for _, r := range res.Rows {
		f.Points = append(f.Points, result.NCCLPoint{SizeBytes: r.SizeBytes, BusBWGBps: r.OutOfPlace.BusBW, InPlaceBusBWGBps: r.InPlace.BusBW})
	}
	return f
}

// page is what the browser shows of a report.
type page struct {
	Verdict      string       `json:"verdict"`
	VerdictColor string       `json:"verdictColor"`
	Rows         []row        `json:"rows"`
	Curves       []curve      `json:"curves"`
	Floors       []floorShape `json:"floors"`
	Timeline     []string     `json:"timeline"`
	Changes      []string     `json:"changes"`
	Requests     int          `json:"requests"`
}

type row struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Shown  bool   `json:"shown"`
	Color  string `json:"color"`
}

type curve struct {
	Name   string `json:"name"`
	Points int    `json:"points"`
	// Visible counts points the browser laid out inside the plot.
	Visible int `json:"visible"`
	Sizes   int `json:"sizes"`
}

type floorShape struct {
	Width float64 `json:"width"`
	GBps  string  `json:"gbps"`
	// Inside: the line lies within the plot's box.
	Inside bool `json:"inside"`
}

// readPage reads, through the DOM as laid out, what a person sees.
const readPage = `(() => {
  const box = e => e.getBoundingClientRect();
  const shown = e => { const b = box(e); return b.width > 0 && b.height > 0 && getComputedStyle(e).visibility !== 'hidden'; };
  const v = document.getElementById('verdict');
  const out = {verdict: v ? v.innerText : '', verdictColor: v ? getComputedStyle(v).backgroundColor : '', rows: [], curves: [], floors: [], timeline: [], changes: [],
    requests: performance.getEntriesByType('resource').length};
  for (const tr of document.querySelectorAll('#checks tbody tr')) {
    out.rows.push({id: tr.dataset.check, status: tr.querySelector('td.status').innerText.trim(), shown: shown(tr), color: getComputedStyle(tr.querySelector('td.status')).color});
  }
  for (const g of document.querySelectorAll('svg.nccl-chart g.curve')) {
    const plot = box(g.ownerSVGElement.querySelector('rect.plot'));
    let visible = 0;
    for (const c of g.querySelectorAll('circle.point')) {
      const b = box(c);
      if (b.width > 0 && b.left + b.width/2 >= plot.left - 1 && b.right - b.width/2 <= plot.right + 1 && b.top + b.height/2 >= plot.top - 1 && b.bottom - b.height/2 <= plot.bottom + 1) visible++;
    }
    out.curves.push({name: g.dataset.name, points: g.querySelectorAll('circle.point').length, visible, sizes: Number(g.dataset.sizes)});
  }
  for (const l of document.querySelectorAll('svg.nccl-chart line.floor')) {
    const plot = box(l.ownerSVGElement.querySelector('rect.plot'));
    const b = box(l);
    out.floors.push({width: b.width, gbps: l.dataset.gbps, inside: b.top >= plot.top - 2 && b.bottom <= plot.bottom + 2});
  }
  for (const tr of document.querySelectorAll('#timeline tr.phase')) out.timeline.push(tr.dataset.phase);
  for (const tr of document.querySelectorAll('#changes tr.change')) out.changes.push(tr.innerText.replace(/\s+/g, ' ').trim());
  return out;
})()`

// open writes r with report.Write into a folder of its own and reads its HTML report in the
// browser.
func open(t *testing.T, r report.Report) page {
	t.Helper()
	dir := t.TempDir()
	if _, err := report.Write(dir, r); err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "file", Path: filepath.Join(dir, report.HTMLFile)}
	tab := browse(t)
	if err := chromedp.Do(tab, chromedp.Navigate(u.String()), chromedp.WaitVisible(chromedp.ID("verdict"))); err != nil {
		t.Fatalf("chromium: opening %s: %v", u.String(), err)
	}
	p, err := chromedp.Run(tab, chromedp.Evaluate[page](readPage))
	if err != nil {
		t.Fatalf("chromium: reading the page: %v", err)
	}
	return p
}

func pass(id string) result.Check {
	return result.Check{ID: id, Status: result.Pass, Expected: "x", Actual: "x"}
}

func TestHTMLReportInChromium(t *testing.T) {
	start := time.Date(2026, 12, 5, 5, 17, 0, 0, time.UTC)
	bake := figures(t, "p5-awsbatch-mpi-tagged-16G", 300)
	failing := report.Report{BuildName: "amazon-ebs.golden", InstanceType: "p5.48xlarge", StartedAt: start, FinishedAt: start.Add(47 * time.Minute),
		Checks: []result.Check{
			pass(result.Kernel), pass(result.Holds), pass(result.GPU), pass(result.NvidiaDriver),
			{ID: result.LayerPrefix + "slurm", Status: result.Pass, Expected: "exit 0", Actual: "exit 0", DurationMS: 190000},
			{ID: result.EFADevices, Status: result.Warn, Expected: "not judged", Actual: "0 devices", Message: "amazon-ebs attaches no EFA"},
			{ID: result.NCCLBusBW, Status: result.Fail, Expected: ">= 300 GB/s", Actual: "12.5 GB/s at 16 GiB", Message: "below the floor", Evidence: "<b>not markup</b>", DurationMS: 95000},
			{ID: result.Xid, Status: result.Fail, Expected: "no Xid", Actual: "Xid 79", Message: "GPU fell off the bus"},
			pass(result.Memlock),
		},
		NCCL:          bake,
		BuildInstance: &report.BuildInstance{InstanceID: "i-0b", InstanceType: "p5.48xlarge", Known: true, Seconds: 2820, Basis: report.BuildInstanceBasis},
		Changes: &result.Changes{Previous: "the bill of materials of golden (prev/dlami-bom.json)", Compared: 30,
			Items: []result.Change{{Component: "kernel", Before: "7.0.0-1014-aws", After: "7.0.0-1015-aws"}, {Component: "nccl", Before: "2.27.3", After: "2.28.1"}}},
	}
	node1, node2 := figures(t, "p5-2node-slurm-srun-prefixed-16G", 350), figures(t, "p4de-2node-slurm-srun-prefixed", 350)
	twoNodes := report.Report{BuildName: "amazon-ebs.golden", Result: report.ResultPass,
		Checks: []result.Check{{ID: result.NCCLMultiNode, Status: result.Pass, Expected: ">= 90 GB/s", Actual: "96 GB/s"}},
		NCCL:   figures(t, "p5-2node-slurm-srun-prefixed-16G", 0),
		Launch: &report.Launch{InstanceType: "p5.48xlarge", Refused: []report.LaunchRefusal{}, Nodes: []report.LaunchNode{
			{InstanceID: "i-0node1", InstanceType: "p5.48xlarge", NCCL: node1}, {InstanceID: "i-0node2", InstanceType: "p5.48xlarge", NCCL: node2}}}}

	t.Run("failing bake", func(t *testing.T) {
		p := open(t, failing)
		if !strings.HasPrefix(p.Verdict, "FAIL") || !strings.Contains(p.Verdict, "nccl-busbw, xid") || p.VerdictColor != "rgb(207, 34, 46)" {
			t.Errorf("verdict %q in %s, want FAIL naming the failed checks on red", p.Verdict, p.VerdictColor)
		}
		if len(p.Rows) != len(failing.Checks) {
			t.Errorf("%d check rows, want %d", len(p.Rows), len(failing.Checks))
		}
		for _, r := range p.Rows {
			if !r.Shown {
				t.Errorf("check row %s is not shown", r.ID)
			}
		}
		// The failing checks first, in red; then the warning; then the rest.
		want := []string{"nccl-busbw fail", "xid fail", "efa-devices warn"}
		for i, w := range want {
			if i >= len(p.Rows) || p.Rows[i].ID+" "+p.Rows[i].Status != w {
				t.Fatalf("rows %+v: row %d is not %s", p.Rows, i, w)
			}
		}
		if p.Rows[0].Color != "rgb(207, 34, 46)" {
			t.Errorf("a failing status is shown in %s, not red", p.Rows[0].Color)
		}
		if len(p.Curves) != 1 || p.Curves[0].Points != len(bake.Points) || p.Curves[0].Visible != len(bake.Points) {
			t.Errorf("curves %+v, want one with a point inside the plot per message size of the run (%d)", p.Curves, len(bake.Points))
		}
		if len(p.Floors) != 1 || p.Floors[0].GBps != "300" || p.Floors[0].Width < 100 || !p.Floors[0].Inside {
			t.Errorf("floor lines %+v, want the 300 GB/s floor drawn across the plot", p.Floors)
		}
		if strings.Join(p.Timeline, ",") != "build,layers,host suite,NCCL" {
			t.Errorf("timeline %v", p.Timeline)
		}
		if len(p.Changes) != 2 || p.Changes[0] != "kernel 7.0.0-1014-aws 7.0.0-1015-aws" {
			t.Errorf("changes %q", p.Changes)
		}
		if p.Requests != 0 {
			t.Errorf("the page loaded %d resources: it must be self-contained", p.Requests)
		}
	})

	t.Run("two-node verification", func(t *testing.T) {
		p := open(t, twoNodes)
		if !strings.HasPrefix(p.Verdict, "PASS") || p.VerdictColor != "rgb(26, 127, 55)" {
			t.Errorf("verdict %q in %s, want PASS on green", p.Verdict, p.VerdictColor)
		}
		var names []string
		for _, c := range p.Curves {
			names = append(names, c.Name)
			want := map[string]int{"this run": len(twoNodes.NCCL.Points), "node 1 (i-0node1)": len(node1.Points), "node 2 (i-0node2)": len(node2.Points)}[c.Name]
			if want == 0 || c.Points != want || c.Visible != want {
				t.Errorf("curve %+v, want %d points inside the plot", c, want)
			}
		}
		if strings.Join(names, ",") != "this run,node 1 (i-0node1),node 2 (i-0node2)" {
			t.Errorf("curves %v, want the test across the nodes, then one per node", names)
		}
		if len(p.Floors) != 1 || p.Floors[0].GBps != "350" || !p.Floors[0].Inside {
			t.Errorf("floor lines %+v", p.Floors)
		}
	})
}
