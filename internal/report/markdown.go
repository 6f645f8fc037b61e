package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"sort"
	"strings"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/textcut"
)

// maxEvidenceBytes bounds each check's evidence in the Markdown summary; GitHub caps a step
// summary at 1 MiB and the full evidence is in the JSON and JUnit reports.
const maxEvidenceBytes = 4000

var statusIcon = map[result.Status]string{
	result.Pass:  "✅ pass",
	result.Fail:  "❌ fail",
	result.Warn:  "⚠️ warn",
	result.Skip:  "⏭️ skip",
	result.Error: "💥 error",
}

// Markdown renders the normalized report as a summary fit for $GITHUB_STEP_SUMMARY: overall
// result, a check table, failure details, drift, layers and the version manifest. Every
// value is escaped, so a '|' or '<' in command output cannot break the tables or inject HTML.
func Markdown(r Report) string {
	var b strings.Builder
	writeMarkdownBanner(&b, r)
	writeMarkdownSummary(&b, r)
	writeMarkdownChecks(&b, r)
	writeMarkdownDetails(&b, r)
	return b.String()
}

// writeMarkdownBanner writes the verdict heading, and the drill's notice.
func writeMarkdownBanner(b *strings.Builder, r Report) {
	switch r.Result {
	case ResultPass:
		b.WriteString("## ✅ DLAMI bake passed\n\n")
	case ResultCancelled:
		b.WriteString("## ⏹️ DLAMI bake cancelled\n\n")
	case ResultError:
		b.WriteString("## 💥 DLAMI bake ended with an error\n\n")
	case ResultDeferred:
		b.WriteString("## ⏳ DLAMI bake passed its first phase; validation deferred to the post-processor\n\n")
	default:
		b.WriteString("## ❌ DLAMI bake failed\n\n")
	}
	if r.Simulated != "" {
		fmt.Fprintf(b, "**SIMULATED**: `%s` failed on purpose (`dlami-node-check --simulate-failure %s`), a drill of the pipeline, not a finding about the node.\n\n", cell(r.Simulated), cell(r.Simulated))
	}
}

// writeMarkdownSummary writes the run's table and the lines that say what ran where.
func writeMarkdownSummary(b *strings.Builder, r Report) {
	b.WriteString("| | |\n|---|---|\n")
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(b, "| %s | %s |\n", k, cell(v))
		}
	}
	row("build", r.BuildName)
	row("result", r.Result)
	row("stage", r.Stage)
	it := r.InstanceType
	if it != "" && r.InstanceTypeSource != "" {
		it += " (" + r.InstanceTypeSource + ")"
	}
	row("instance type", it)
	row("plugin version", r.PluginVersion)
	row("simulated", r.Simulated)
	if e := r.Evidence; e != nil {
		row("evidence", strings.TrimSpace(e.Path+" "+e.Uploaded))
		row("evidence problems", strings.Join(e.Problems, "; "))
	}
	if rp := r.Replacement; rp != nil {
		row("replacement ("+rp.Engine+")", strings.TrimSpace(rp.Message+" "+rp.Problem))
	}
	if !r.StartedAt.IsZero() {
		row("started", r.StartedAt.UTC().Format(time.RFC3339))
	}
	if !r.FinishedAt.IsZero() {
		v := r.FinishedAt.UTC().Format(time.RFC3339)
		if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
			v += " (" + r.FinishedAt.Sub(r.StartedAt).Round(time.Second).String() + ")"
		}
		row("finished", v)
	}
	if len(r.FailedChecks) > 0 {
		fmt.Fprintf(b, "\n**Failed checks:** %s\n", cell(strings.Join(r.FailedChecks, ", ")))
	}
	if r.Error != "" {
		fmt.Fprintf(b, "\n**Error:** %s\n", cell(r.Error))
	}
	if len(r.DeferredChecks) > 0 {
		fmt.Fprintf(b, "\n**Deferred to the post-processor (defer_validation = true; complete_validation = true runs them on a GPU instance):** %s\n", cell(strings.Join(r.DeferredChecks, ", ")))
	}
	if l := r.Launch; l != nil {
		v := l.InstanceType
		for _, x := range l.Refused {
			v += fmt.Sprintf("; refused first: %s (%s)", x.InstanceType, x.Code)
		}
		fmt.Fprintf(b, "\n**Verified on:** %s\n", cell(v))
	}
	if bi := r.BuildInstance; bi != nil {
		fmt.Fprintf(b, "\n**Build instance time:** %s\n", cell(bi.Summary()))
	}
	if c := r.Cost; c != nil {
		fmt.Fprintf(b, "\n**Instance time of the run (%s):** %s\n", CostFileName, cell(c.Summary()))
	}
	if len(r.HeldByPlugin) > 0 {
		fmt.Fprintf(b, "\n**Put on hold by the plugin (hold_unheld):** %s\n", cell(strings.Join(r.HeldByPlugin, ", ")))
	}
}

// writeMarkdownChecks writes the checks table and, with evidence folded, every failure and
// warning.
func writeMarkdownChecks(b *strings.Builder, r Report) {
	b.WriteString("\n### Checks\n\n")
	if len(r.Checks) == 0 {
		b.WriteString("No checks ran.\n")
	} else {
		b.WriteString("| check | status | expected | actual |\n|---|---|---|---|\n")
		for _, c := range r.Checks {
			st, ok := statusIcon[c.Status]
			if !ok {
				st = string(c.Status)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(c.ID), cell(st), cell(c.Expected), cell(c.Actual))
		}
	}

	var details []result.Check
	for _, c := range r.Checks {
		if c.Status.Failing() || c.Status == result.Warn {
			details = append(details, c)
		}
	}
	if len(details) > 0 {
		b.WriteString("\n### Failures and warnings\n")
		for _, c := range details {
			if c.Evidence == "" {
				fmt.Fprintf(b, "\n- **%s** (%s): %s\n", cell(c.ID), cell(string(c.Status)), cell(oneLine(c.Message)))
				continue
			}
			fmt.Fprintf(b, "\n<details><summary><b>%s</b> (%s): %s</summary>\n\n<pre>%s</pre>\n</details>\n",
				html.EscapeString(c.ID), html.EscapeString(string(c.Status)), html.EscapeString(oneLine(c.Message)),
				html.EscapeString(textcut.HeadNote(c.Evidence, maxEvidenceBytes)))
		}
	}
}

// writeMarkdownDetails writes the drift, the layers, the manifest and the NCCL figures.
func writeMarkdownDetails(b *strings.Builder, r Report) {
	b.WriteString("\n### Drift\n\n")
	if len(r.Drift) == 0 {
		b.WriteString("None.\n")
	}
	for _, d := range r.Drift {
		fmt.Fprintf(b, "- `%s` %s\n", d.Kind, cell(d.String()))
	}

	var layers []result.Check
	for _, c := range r.Checks {
		if strings.HasPrefix(c.ID, result.LayerPrefix) {
			layers = append(layers, c)
		}
	}
	if len(layers) > 0 {
		b.WriteString("\n### Layers\n\n| layer | status | exit | duration |\n|---|---|---|---|\n")
		for _, l := range layers {
			d := (time.Duration(l.DurationMS) * time.Millisecond).Round(time.Second / 10).String()
			exit := "-"
			if l.ExitCode != nil {
				exit = fmt.Sprint(*l.ExitCode)
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(strings.TrimPrefix(l.ID, result.LayerPrefix)), cell(string(l.Status)), cell(exit), cell(d))
		}
	}

	if len(r.Manifest) > 0 {
		b.WriteString("\n### Manifest\n\n| component | version |\n|---|---|\n")
		keys := make([]string, 0, len(r.Manifest))
		for k := range r.Manifest {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(b, "| %s | %s |\n", cell(k), cell(r.Manifest[k]))
		}
	}

	if r.NCCL != nil {
		if raw, err := json.Marshal(r.NCCL); err == nil {
			var pretty bytes.Buffer
			if json.Indent(&pretty, raw, "", "  ") == nil {
				raw = pretty.Bytes()
			}
			fmt.Fprintf(b, "\n<details><summary>NCCL</summary>\n\n<pre>%s</pre>\n</details>\n", html.EscapeString(textcut.HeadNote(string(raw), maxEvidenceBytes)))
		}
	}
}

// cell escapes a value for a Markdown table cell or list item: HTML is neutralised, Markdown
// punctuation that could start emphasis, code, links or strikethrough is backslash-escaped,
// '|' cannot end the cell, and newlines become <br>.
func cell(s string) string {
	var b strings.Builder
	for _, r := range strings.TrimSpace(s) {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\\', '|', '*', '_', '`', '[', ']', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\r':
		case '\n':
			b.WriteString("<br>")
		default:
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return " "
	}
	return b.String()
}
