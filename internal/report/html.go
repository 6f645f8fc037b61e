package report

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/checks"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// maxHTMLEvidenceBytes bounds each check's evidence in the HTML report, which is opened from a
// CI artifact in a browser; the whole evidence is in the JSON and JUnit reports.
const maxHTMLEvidenceBytes = 16000

//go:embed html.tmpl
var htmlSource string

// htmlTemplate escapes every value it is given: html/template escapes by context (text,
// attribute, CSS, URL), so command output in a check cannot add markup or script.
var htmlTemplate = template.Must(template.New("report").Parse(htmlSource))

// HTML renders the normalized report as one self-contained page for a person: a verdict
// banner, the checks (failing first, evidence folded), the NCCL bus bandwidth against message
// size as inline SVG (the bake's or the verification's run, each node's own run in a
// multi-node verification, with the busbw floor), the timeline per phase with its
// GPU-instance minutes, and what changed since a previous bill of materials. It loads nothing
// from elsewhere: no script, no stylesheet, no font, no image.
func HTML(r Report) ([]byte, error) {
	var b bytes.Buffer
	if err := htmlTemplate.Execute(&b, htmlPageOf(r)); err != nil {
		return nil, fmt.Errorf("report: rendering HTML: %w", err)
	}
	return b.Bytes(), nil
}

// htmlPage is what the template shows; every string in it is escaped by the template.
type htmlPage struct {
	Title        string
	Verdict      string
	VerdictClass string
	Simulated    string
	Error        string
	Facts        [][2]string
	Counts       string
	Checks       []htmlCheck
	Charts       []htmlChart
	Timeline     []htmlPhase
	TimelineNote string
	GPUMinutes   string
	Changes      *result.Changes
	Drift        []string
	Manifest     [][2]string
}

// htmlPhase is a timeline row: its bar is Pct of the longest phase.
type htmlPhase struct {
	PhaseTime
	Pct        float64
	Time       string
	GPUMinutes string
}

type htmlCheck struct {
	ID, Status, Class, Basis, Expected, Actual, Message, Evidence, Duration string
}

func htmlPageOf(r Report) htmlPage {
	p := htmlPage{Title: "dlami report", Simulated: r.Simulated, Error: r.Error}
	if r.BuildName != "" {
		p.Title += ": " + r.BuildName
	}
	p.Verdict, p.VerdictClass = htmlVerdict(r)
	p.Facts = htmlFacts(r)
	p.Checks, p.Counts = htmlChecks(r)
	p.Charts = ncclCharts(r)
	p.Timeline, p.GPUMinutes, p.TimelineNote = htmlTimeline(r)
	p.Changes = r.Changes
	for _, d := range r.Drift {
		p.Drift = append(p.Drift, string(d.Kind)+" "+d.String())
	}
	keys := make([]string, 0, len(r.Manifest))
	for k := range r.Manifest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.Manifest = append(p.Manifest, [2]string{k, r.Manifest[k]})
	}
	return p
}

// htmlVerdict is the banner's sentence and its colour class.
func htmlVerdict(r Report) (verdict, class string) {
	what := reportKind(r)
	switch r.Result {
	case ResultPass:
		verdict, class = "PASS: the "+what+" passed", "pass"
	case ResultDeferred:
		verdict, class = "DEFERRED: the "+what+" passed its first phase; the host suite and the NCCL test are left to the post-processor (not validated yet)", "warn"
	case ResultCancelled:
		verdict, class = "CANCELLED: the "+what+" was cancelled before it finished", "fail"
	case ResultError:
		verdict, class = "ERROR: the "+what+" could not finish", "fail"
	default:
		verdict, class = "FAIL: the "+what+" failed", "fail"
	}
	if len(r.FailedChecks) > 0 {
		verdict += " (" + strings.Join(r.FailedChecks, ", ") + ")"
	}
	return verdict, class
}

// htmlFacts are the run's facts, in the order a person reads them; empty values are left out.
func htmlFacts(r Report) [][2]string {
	var facts [][2]string
	fact := func(k, v string) {
		if v != "" {
			facts = append(facts, [2]string{k, v})
		}
	}
	fact("build", r.BuildName)
	fact("result", r.Result)
	fact("stage", r.Stage)
	it := r.InstanceType
	if it != "" && r.InstanceTypeSource != "" {
		it += " (" + r.InstanceTypeSource + ")"
	}
	fact("instance type", it)
	if l := r.Launch; l != nil {
		v := l.InstanceType
		for _, x := range l.Refused {
			v += fmt.Sprintf("; refused first: %s (%s)", x.InstanceType, x.Code)
		}
		fact("verified on", v)
		for i, n := range l.Nodes {
			fact(fmt.Sprintf("node %d", i+1), strings.TrimSpace(fmt.Sprintf("%s %s %s", n.InstanceID, n.InstanceType, n.PrivateIP)))
		}
	}
	fact("plugin version", r.PluginVersion)
	if !r.StartedAt.IsZero() {
		fact("started", r.StartedAt.UTC().Format(time.RFC3339))
	}
	if !r.FinishedAt.IsZero() {
		v := r.FinishedAt.UTC().Format(time.RFC3339)
		if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
			v += " (" + r.FinishedAt.Sub(r.StartedAt).Round(time.Second).String() + ")"
		}
		fact("finished", v)
	}
	if bi := r.BuildInstance; bi != nil {
		fact("build instance time", bi.Summary())
	}
	if c := r.Cost; c != nil {
		fact("instance time of the run", c.Summary())
	}
	if len(r.DeferredChecks) > 0 {
		fact("deferred to the post-processor", strings.Join(r.DeferredChecks, ", "))
	}
	if len(r.HeldByPlugin) > 0 {
		fact("put on hold by the plugin (hold_unheld)", strings.Join(r.HeldByPlugin, ", "))
	}
	if e := r.Evidence; e != nil {
		fact("evidence", strings.TrimSpace(e.Path+" "+e.Uploaded))
		fact("evidence problems", strings.Join(e.Problems, "; "))
	}
	if rp := r.Replacement; rp != nil {
		fact("replacement ("+rp.Engine+")", strings.TrimSpace(rp.Message+" "+rp.Problem))
	}

	return facts
}

// htmlChecks are the checks in the order people read them (failures first), and their count
// by status.
func htmlChecks(r Report) (checks []htmlCheck, counts string) {
	byStatus := map[result.Status]int{}
	for _, c := range orderedForPeople(r.Checks) {
		byStatus[c.Status]++
		hc := htmlCheck{ID: c.ID, Status: string(c.Status), Class: statusClass(c.Status), Basis: c.Basis, Expected: c.Expected,
			Actual: c.Actual, Message: c.Message, Evidence: textcut.HeadNote(c.Evidence, maxHTMLEvidenceBytes)}
		if c.DurationMS > 0 {
			hc.Duration = (time.Duration(c.DurationMS) * time.Millisecond).Round(time.Second / 10).String()
		}
		checks = append(checks, hc)
	}
	var parts []string
	for _, s := range []result.Status{result.Fail, result.Error, result.Warn, result.Pass, result.Skip} {
		if byStatus[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", byStatus[s], s))
		}
	}
	return checks, strings.Join(parts, ", ")

}

// htmlTimeline is the run's phases with their bars, the GPU-instance minutes of the whole run
// ("" without phases) and the timeline's note.
func htmlTimeline(r Report) (timeline []htmlPhase, gpuMinutes, note string) {
	phases, note := Timeline(r)
	gpu, longest := 0.0, 0.0
	for _, ph := range phases {
		if !ph.Part {
			gpu += ph.GPUSeconds
		}
		longest = max(longest, ph.Seconds)
	}
	for _, ph := range phases {
		hp := htmlPhase{PhaseTime: ph, Time: costSeconds(ph.Seconds), GPUMinutes: minutes(ph.GPUSeconds)}
		if longest > 0 {
			hp.Pct = math.Round(ph.Seconds/longest*1000) / 10
		}
		timeline = append(timeline, hp)
	}
	if len(phases) > 0 {
		gpuMinutes = minutes(gpu)
	}
	return timeline, gpuMinutes, note
}

// reportKind names what the report judged, for the banner.
func reportKind(r Report) string {
	switch {
	case r.Launch != nil && len(r.Launch.Nodes) > 1:
		return "NCCL test across the verification's nodes"
	case r.Launch != nil:
		return "first-boot verification"
	case r.Evidence != nil || r.Replacement != nil || r.Simulated != "":
		return "node check"
	default:
		return "bake"
	}
}

// statusRank orders checks for a person: what failed first, then what warned, then the rest.
func statusRank(s result.Status) int {
	switch s {
	case result.Fail, result.Error:
		return 0
	case result.Warn:
		return 1
	case result.Pass:
		return 2
	case result.Skip:
		return 3
	}
	return 0 // an unknown status is not a pass
}

// orderedForPeople is cs with the failing checks first, then the warnings, then the passes and
// the skips, each group in the run's order.
func orderedForPeople(cs []result.Check) []result.Check {
	out := slices.Clone(cs)
	slices.SortStableFunc(out, func(a, b result.Check) int { return statusRank(a.Status) - statusRank(b.Status) })
	return out
}

func statusClass(s result.Status) string {
	switch s {
	case result.Pass, result.Fail, result.Warn, result.Skip, result.Error:
		return string(s)
	}
	return string(result.Fail)
}

// PhaseTime is one phase of a bake's timeline.
type PhaseTime struct {
	Phase string
	// Seconds is the phase's time; GPUSeconds the part of it spent on GPU instances (instance
	// seconds: a phase on two GPU instances counts both).
	Seconds    float64
	GPUSeconds float64
	// Part is true for a phase inside the one above it (the layers, the host suite, the NCCL
	// test and the deeper tests are part of the build; the test across nodes part of the
	// verification): not added to the total twice.
	Part bool
	// Note says where the figure comes from, or why there is none.
	Note string
}

// Timeline is the bake's time per phase as far as the report knows it. A bake's report: the
// build (the build instance from its boot to the end of provisioning) and within it the layers,
// the host suite, the NCCL test and the deeper tests (the checks' own durations, the NCCL test's
// seconds); the snapshot after provisioning is not seen by the provisioner, and the note says
// so. A verification's report, once the post-processor added the run's instance time: the
// build (EC2's launch to termination of the build instance, the snapshot included), the
// verification (EC2's times of its instances, every node) and within it this instance's phases
// and the test across the nodes. The note says what is not measured.
func Timeline(r Report) ([]PhaseTime, string) {
	var out []PhaseTime
	var unknown []string
	buildGPU := false
	if bi := r.BuildInstance; bi != nil {
		buildGPU = GPUInstanceType(firstNonEmpty(bi.InstanceType, r.InstanceType))
		if bi.Known {
			out = append(out, PhaseTime{Phase: "build", Seconds: bi.Seconds, GPUSeconds: gpuShare(buildGPU, bi.Seconds), Note: "the build instance from its boot to the end of provisioning"})
		} else {
			unknown = append(unknown, "build: "+bi.Unknown)
		}
	} else if c := r.Cost; c != nil && len(c.Build.Instances) > 0 {
		out = append(out, PhaseTime{Phase: "build", Seconds: c.Build.InstanceSeconds, GPUSeconds: costGPU(c.Build), Note: "EC2's launch to termination of the build instance (the snapshot included)"})
	}
	var layers, host, nccl, deeper, guard float64
	var sawHost, sawDeeper bool
	for _, c := range r.Checks {
		sec := float64(c.DurationMS) / 1000
		if strings.HasPrefix(c.ID, result.LayerPrefix) {
			layers += sec
			continue
		}
		e, ok := checks.Lookup(c.ID)
		if !ok || c.Status == result.Skip {
			continue
		}
		// The checks of one phase are judged together and each carries the phase's time.
		switch e.Phase {
		case checks.PhaseGuard, checks.PhaseFirstBoot:
			guard = max(guard, sec)
		case checks.PhaseHost:
			host, sawHost = max(host, sec), true
		case checks.PhaseLoad:
			nccl = max(nccl, sec)
		case checks.PhaseFunction:
			deeper, sawDeeper = deeper+sec, true
		}
	}
	if r.NCCL != nil && r.NCCL.Seconds > 0 {
		nccl = r.NCCL.Seconds
	}
	// A bake's phases ran on its build instance, inside the build row; a verification's on its
	// own instance, inside the verification row.
	onBuild := r.Launch == nil
	gpu := buildGPU
	if !onBuild {
		gpu = GPUInstanceType(r.InstanceType)
	}
	var parts []PhaseTime
	part := func(name string, s float64, shown bool, note string) {
		if shown {
			parts = append(parts, PhaseTime{Phase: name, Seconds: s, GPUSeconds: gpuShare(gpu, s), Note: note})
		}
	}
	if !onBuild {
		part("first-boot guard", guard, guard > 0, "the first boot's kernel and packages against the bill of materials")
	}
	part("layers", layers, layers > 0, "the layers' scripts")
	part("host suite", host, sawHost, "the host checks' commands")
	part("NCCL", nccl, nccl > 0, "the NCCL all-reduce test")
	part("deeper tests", deeper, sawDeeper, "DCGM, the EFA traffic test, GPUDirect RDMA")
	within := func(row bool) []PhaseTime {
		for i := range parts {
			parts[i].Part = row
		}
		return parts
	}
	if onBuild {
		out = append(out, within(len(out) > 0)...)
		if r.BuildInstance != nil {
			unknown = append(unknown, "snapshot: amazon-ebs stops the instance and registers the AMI after the provisioner, which sees none of it; the post-processor's report and dlami-cost.json count the build instance to its termination")
		}
	}
	verified := false
	if c := r.Cost; c != nil {
		if len(c.Verification.Instances) > 0 {
			verified = true
			out = append(out, PhaseTime{Phase: "verification", Seconds: c.Verification.InstanceSeconds, GPUSeconds: costGPU(c.Verification), Note: "EC2's launch to termination of the post-processor's instances, every node"})
		} else if !c.Verification.Known {
			unknown = append(unknown, "verification: "+c.Verification.Unknown)
		}
	} else if !onBuild {
		unknown = append(unknown, "verification: the post-processor adds the instance time once its instances are gone")
	}
	if !onBuild {
		out = append(out, within(verified)...)
	}
	if c := r.Cost; c != nil && c.MultiNode != nil {
		m := c.MultiNode
		out = append(out, PhaseTime{Phase: "NCCL across nodes", Seconds: m.InstanceSeconds, GPUSeconds: costGPU(*m), Part: verified, Note: "each node's time in the test across the nodes"})
	}
	return out, strings.Join(unknown, "; ")
}

func gpuShare(gpu bool, s float64) float64 {
	if gpu {
		return s
	}
	return 0
}

func costGPU(p CostPhase) float64 {
	var s float64
	for _, i := range p.Instances {
		if GPUInstanceType(i.InstanceType) {
			s += i.Seconds
		}
	}
	return s
}

// GPUInstanceType reports whether an EC2 instance type is of a family with NVIDIA GPUs (the
// accelerated computing families P and G: p5.48xlarge, p6-b200.48xlarge, g6e.xlarge).
func GPUInstanceType(t string) bool {
	fam, _, _ := strings.Cut(strings.ToLower(t), ".")
	return len(fam) > 1 && (fam[0] == 'p' || fam[0] == 'g') && fam[1] >= '0' && fam[1] <= '9'
}

func minutes(s float64) string {
	return strconv.FormatFloat(math.Round(s/6)/10, 'f', 1, 64)
}

// htmlChart is one plot of busbw against message size.
type htmlChart struct {
	Title  string
	Note   string
	Width  int
	Height int
	PlotX  float64
	PlotW  float64
	PlotY  float64
	PlotH  float64
	// PlotRight is PlotX + PlotW, for the lines across the plot.
	PlotRight float64
	Curves    []htmlCurve
	Floors    []htmlFloor
	XTicks    []htmlTick
	YTicks    []htmlTick
	Missing   []string
}

type htmlCurve struct {
	Name     string
	Color    string
	Polyline string
	Points   []htmlPoint
	// Sizes is how many message sizes the run's table has (points without a number included).
	Sizes int
}

type htmlPoint struct {
	X, Y  float64
	Size  int64
	Label string
}

type htmlFloor struct {
	Y     float64
	GBps  float64
	Label string
}

type htmlTick struct {
	Pos   float64
	Label string
}

// curveColors are distinguishable for most readers (Okabe-Ito).
var curveColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"}

// namedRun is one NCCL run to draw.
type namedRun struct {
	name string
	fig  *result.NCCLFigures
}

// ncclCharts are the report's plots: its own NCCL run (the bake's, a verification's, or the
// test across nodes), and in a multi-node report each node's own run on one plot.
func ncclCharts(r Report) []htmlChart {
	var charts []htmlChart
	if r.NCCL != nil {
		title := "NCCL all-reduce: bus bandwidth by message size"
		if r.Launch != nil && len(r.Launch.Nodes) > 1 {
			title = fmt.Sprintf("NCCL all-reduce across %d nodes: bus bandwidth by message size", len(r.Launch.Nodes))
		}
		charts = append(charts, chartOf(title, []namedRun{{"this run", r.NCCL}}))
	}
	if r.Launch != nil && len(r.Launch.Nodes) > 1 {
		var runs []namedRun
		var missing []string
		for i, n := range r.Launch.Nodes {
			name := fmt.Sprintf("node %d (%s)", i+1, n.InstanceID)
			if n.NCCL == nil {
				missing = append(missing, name)
				continue
			}
			runs = append(runs, namedRun{name, n.NCCL})
		}
		if len(runs) > 0 {
			c := chartOf("Each node's own NCCL test (first boot): bus bandwidth by message size", runs)
			for _, m := range missing {
				c.Missing = append(c.Missing, m+": no NCCL test of its own")
			}
			charts = append(charts, c)
		}
	}
	return charts
}

// chartOf lays out runs on one plot: x is the message size on a log scale (base 2), y the
// out-of-place busbw in GB/s from 0, with each distinct floor as a line.
func chartOf(title string, runs []namedRun) htmlChart {
	c := htmlChart{Title: title, Width: 720, Height: 360, PlotX: 70, PlotY: 20}
	c.PlotW, c.PlotH = float64(c.Width)-c.PlotX-20, float64(c.Height)-c.PlotY-60
	c.PlotRight = c.PlotX + c.PlotW
	minX, maxX := math.Inf(1), math.Inf(-1)
	maxY := 0.0
	var floors []float64
	for _, run := range runs {
		for _, pt := range run.fig.Points {
			if pt.SizeBytes > 0 {
				x := math.Log2(float64(pt.SizeBytes))
				minX, maxX = min(minX, x), max(maxX, x)
			}
			if pt.BusBWGBps != nil && finite(*pt.BusBWGBps) {
				maxY = max(maxY, *pt.BusBWGBps)
			}
		}
		if f := run.fig.BusBWFloorGBps; f != nil && finite(*f) && *f > 0 && !slices.Contains(floors, *f) {
			floors = append(floors, *f)
			maxY = max(maxY, *f)
		}
	}
	if math.IsInf(minX, 1) {
		minX, maxX = 0, 1
	}
	if maxX-minX < 1 {
		minX, maxX = minX-0.5, maxX+0.5
	}
	if maxY <= 0 {
		maxY = 1
	}
	maxY = niceCeil(maxY * 1.1)
	xOf := func(size int64) float64 {
		return round1(c.PlotX + (math.Log2(float64(size))-minX)/(maxX-minX)*c.PlotW)
	}
	yOf := func(v float64) float64 { return round1(c.PlotY + c.PlotH - v/maxY*c.PlotH) }
	for i, run := range runs {
		cv := htmlCurve{Name: run.name, Color: curveColors[i%len(curveColors)], Sizes: len(run.fig.Points)}
		var line []string
		for _, pt := range run.fig.Points {
			if pt.SizeBytes <= 0 || pt.BusBWGBps == nil || !finite(*pt.BusBWGBps) {
				continue
			}
			hp := htmlPoint{X: xOf(pt.SizeBytes), Y: yOf(*pt.BusBWGBps), Size: pt.SizeBytes,
				Label: fmt.Sprintf("%s: %s GB/s busbw (out-of-place)", sizeLabel(pt.SizeBytes), gbps(*pt.BusBWGBps))}
			cv.Points = append(cv.Points, hp)
			line = append(line, fmt.Sprintf("%g,%g", hp.X, hp.Y))
		}
		cv.Polyline = strings.Join(line, " ")
		if len(cv.Points) < cv.Sizes {
			c.Missing = append(c.Missing, fmt.Sprintf("%s: %d of %d message sizes have no busbw figure", run.name, cv.Sizes-len(cv.Points), cv.Sizes))
		}
		if cv.Sizes == 0 {
			c.Missing = append(c.Missing, run.name+": no result rows (the test printed no table)")
		}
		c.Curves = append(c.Curves, cv)
	}
	for _, f := range floors {
		c.Floors = append(c.Floors, htmlFloor{Y: yOf(f), GBps: f, Label: "floor " + gbps(f) + " GB/s"})
	}
	// At most about ten labels: every power of two on a short sweep, every 8x on 8 B to 16 GiB.
	step := max(1, int(math.Ceil((maxX-minX)/10)))
	for e, i := math.Ceil(minX), 0; e <= math.Floor(maxX); e, i = e+1, i+1 {
		if i%step != 0 {
			continue
		}
		size := int64(math.Exp2(e))
		c.XTicks = append(c.XTicks, htmlTick{Pos: xOf(size), Label: sizeLabel(size)})
	}
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		c.YTicks = append(c.YTicks, htmlTick{Pos: yOf(v), Label: gbps(v)})
	}
	return c
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func gbps(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

// sizeLabel is a message size as nccl-tests users say it: 8 B, 64 KiB, 1 GiB.
func sizeLabel(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v := float64(n)
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + units[u]
}
