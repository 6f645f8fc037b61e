package e2e

// A reader for the subset of YAML that GitHub Actions workflows use (block mappings and
// sequences, plain and quoted scalars, literal block scalars, comments), so that the rebake
// loop test can run the steps of examples/rebake/rebake.yml as written. The module has no
// YAML library; this one refuses what it does not understand instead of guessing.

import (
	"fmt"
	"strconv"
	"strings"
)

type yamlKind int

const (
	yamlScalar yamlKind = iota
	yamlMapping
	yamlSequence
)

// yamlNode is one value of the document.
type yamlNode struct {
	Kind  yamlKind
	Value string               // scalar text (flow collections like [a, b] stay raw text)
	Keys  []string             // mapping keys in document order
	Map   map[string]*yamlNode // mapping values
	Items []*yamlNode          // sequence items
	Line  int                  // 1-based line where the value starts
}

// get walks mapping keys; nil when a key is missing or a node is not a mapping.
func (n *yamlNode) get(path ...string) *yamlNode {
	for _, k := range path {
		if n == nil || n.Kind != yamlMapping {
			return nil
		}
		n = n.Map[k]
	}
	return n
}

// str is a scalar's text, "" for anything else.
func (n *yamlNode) str() string {
	if n == nil || n.Kind != yamlScalar {
		return ""
	}
	return n.Value
}

// strMap is a mapping of scalars as a Go map; non-scalar values are an error.
func (n *yamlNode) strMap() (map[string]string, error) {
	out := map[string]string{}
	if n == nil {
		return out, nil
	}
	if n.Kind != yamlMapping {
		return nil, fmt.Errorf("line %d: want a mapping", n.Line)
	}
	for _, k := range n.Keys {
		v := n.Map[k]
		if v.Kind != yamlScalar {
			return nil, fmt.Errorf("line %d: %s: want a scalar", v.Line, k)
		}
		out[k] = v.Value
	}
	return out, nil
}

type yamlLine struct {
	num    int
	indent int
	text   string // without the indentation
}

type yamlParser struct {
	lines []yamlLine
	pos   int
}

// parseYAML reads a workflow file into its root node.
func parseYAML(text string) (*yamlNode, error) {
	p := &yamlParser{}
	for i, raw := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		trimmed := strings.TrimLeft(raw, " ")
		if strings.HasPrefix(trimmed, "\t") {
			return nil, fmt.Errorf("line %d: a tab in the indentation (YAML forbids tabs)", i+1)
		}
		p.lines = append(p.lines, yamlLine{num: i + 1, indent: len(raw) - len(trimmed), text: strings.TrimRight(trimmed, " \t")})
	}
	p.skipBlank()
	if p.pos < len(p.lines) && p.lines[p.pos].text == "---" {
		p.pos++
	}
	p.skipBlank()
	if p.pos >= len(p.lines) {
		return nil, fmt.Errorf("empty document")
	}
	root, err := p.block(0)
	if err != nil {
		return nil, err
	}
	p.skipBlank()
	if p.pos < len(p.lines) {
		l := p.lines[p.pos]
		return nil, fmt.Errorf("line %d: unexpected indentation %d (%q)", l.num, l.indent, l.text)
	}
	return root, nil
}

// skipBlank moves past empty and comment-only lines.
func (p *yamlParser) skipBlank() {
	for p.pos < len(p.lines) && (p.lines[p.pos].text == "" || strings.HasPrefix(p.lines[p.pos].text, "#")) {
		p.pos++
	}
}

// block parses the mapping or sequence that starts at the next line, indented at least min.
func (p *yamlParser) block(min int) (*yamlNode, error) {
	p.skipBlank()
	if p.pos >= len(p.lines) {
		return nil, fmt.Errorf("line %d: a value is missing at the end of the document", p.lines[len(p.lines)-1].num)
	}
	l := p.lines[p.pos]
	if l.indent < min {
		return nil, fmt.Errorf("line %d: a value is missing (indentation %d, want at least %d)", l.num, l.indent, min)
	}
	if isSeqItem(l.text) {
		return p.sequence(l.indent)
	}
	return p.mapping(l.indent)
}

func isSeqItem(text string) bool { return text == "-" || strings.HasPrefix(text, "- ") }

func (p *yamlParser) mapping(indent int) (*yamlNode, error) {
	n := &yamlNode{Kind: yamlMapping, Map: map[string]*yamlNode{}, Line: p.lines[p.pos].num}
	for {
		p.skipBlank()
		if p.pos >= len(p.lines) {
			return n, nil
		}
		l := p.lines[p.pos]
		if l.indent < indent || (l.indent == indent && isSeqItem(l.text)) {
			return n, nil
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation %d in a mapping indented %d", l.num, l.indent, indent)
		}
		key, rest, err := splitKey(l.text)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", l.num, err)
		}
		if _, dup := n.Map[key]; dup {
			return nil, fmt.Errorf("line %d: duplicate key %q", l.num, key)
		}
		p.pos++
		var v *yamlNode
		switch {
		case rest == "":
			p.skipBlank()
			// A sequence may sit at the key's own indentation ("steps:\n- run: x").
			if p.pos < len(p.lines) && (p.lines[p.pos].indent > indent || (p.lines[p.pos].indent == indent && isSeqItem(p.lines[p.pos].text))) {
				if v, err = p.block(indent); err != nil {
					return nil, err
				}
			} else {
				v = &yamlNode{Kind: yamlScalar, Line: l.num}
			}
		case rest == "|" || rest == "|-" || rest == "|+":
			v = p.literal(indent, rest, l.num)
		case strings.HasPrefix(rest, ">") || strings.HasPrefix(rest, "&") || strings.HasPrefix(rest, "*") || strings.HasPrefix(rest, "!"):
			return nil, fmt.Errorf("line %d: %q: folded scalars, anchors, aliases and tags are not supported", l.num, rest)
		default:
			s, err := scalar(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", l.num, err)
			}
			v = &yamlNode{Kind: yamlScalar, Value: s, Line: l.num}
		}
		n.Keys = append(n.Keys, key)
		n.Map[key] = v
	}
}

func (p *yamlParser) sequence(indent int) (*yamlNode, error) {
	n := &yamlNode{Kind: yamlSequence, Line: p.lines[p.pos].num}
	for {
		p.skipBlank()
		if p.pos >= len(p.lines) {
			return n, nil
		}
		l := p.lines[p.pos]
		if l.indent < indent || (l.indent == indent && !isSeqItem(l.text)) {
			return n, nil
		}
		if l.indent > indent {
			return nil, fmt.Errorf("line %d: unexpected indentation %d in a sequence indented %d", l.num, l.indent, indent)
		}
		content := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		var item *yamlNode
		var err error
		switch {
		case content == "" || strings.HasPrefix(content, "#"):
			p.pos++
			item, err = p.block(indent + 1)
		case isSeqItem(content):
			// "- - x": a sequence whose first item shares the line.
			inner := l.indent + len(l.text) - len(content)
			p.lines[p.pos] = yamlLine{num: l.num, indent: inner, text: content}
			item, err = p.sequence(inner)
		case looksLikeKey(content):
			// "- key: v" starts a mapping whose keys line up with "key".
			inner := l.indent + len(l.text) - len(content)
			p.lines[p.pos] = yamlLine{num: l.num, indent: inner, text: content}
			item, err = p.mapping(inner)
		default:
			p.pos++
			var s string
			s, err = scalar(content)
			item = &yamlNode{Kind: yamlScalar, Value: s, Line: l.num}
		}
		if err != nil {
			return nil, err
		}
		n.Items = append(n.Items, item)
	}
}

// literal reads a "|" block scalar below a key indented at parent.
func (p *yamlParser) literal(parent int, header string, line int) *yamlNode {
	var body []yamlLine
	for p.pos < len(p.lines) {
		l := p.lines[p.pos]
		if l.text != "" && l.indent <= parent {
			break
		}
		body = append(body, l)
		p.pos++
	}
	blockIndent := -1
	for _, l := range body {
		if l.text != "" {
			blockIndent = l.indent
			break
		}
	}
	var b strings.Builder
	for _, l := range body {
		if l.text == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(strings.Repeat(" ", max(0, l.indent-blockIndent)) + l.text + "\n")
	}
	s := b.String()
	switch header {
	case "|": // clip: exactly one final newline
		s = strings.TrimRight(s, "\n")
		if s != "" {
			s += "\n"
		}
	case "|-":
		s = strings.TrimRight(s, "\n")
	}
	return &yamlNode{Kind: yamlScalar, Value: s, Line: line}
}

// looksLikeKey reports whether text starts a "key: value" pair.
func looksLikeKey(text string) bool {
	_, _, err := splitKey(text)
	return err == nil
}

// splitKey splits "key: rest" (key plain or quoted) and drops a trailing comment of rest.
func splitKey(text string) (key, rest string, err error) {
	if strings.HasPrefix(text, `"`) || strings.HasPrefix(text, `'`) {
		end := closingQuote(text)
		if end < 0 || !strings.HasPrefix(text[end+1:], ":") {
			return "", "", fmt.Errorf("want a key: value pair, got %q", text)
		}
		if key, err = scalar(text[:end+1]); err != nil {
			return "", "", err
		}
		rest = text[end+2:]
	} else {
		i := strings.Index(text, ": ")
		if strings.HasSuffix(text, ":") && (i < 0 || i == len(text)-1) {
			i = len(text) - 1
		}
		if i <= 0 || strings.ContainsAny(text[:i], "#{}[]") {
			return "", "", fmt.Errorf("want a key: value pair, got %q", text)
		}
		key, rest = text[:i], text[i+1:]
	}
	rest = strings.TrimSpace(rest)
	if rest != "" && !strings.HasPrefix(rest, `"`) && !strings.HasPrefix(rest, `'`) {
		rest = stripComment(rest)
	}
	return key, rest, nil
}

// stripComment drops " # comment" from a plain scalar.
func stripComment(s string) string {
	if strings.HasPrefix(s, "#") {
		return ""
	}
	if i := strings.Index(s, " #"); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// closingQuote returns the index of the quote that closes s[0], or -1.
func closingQuote(s string) int {
	q := s[0]
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == q:
			return i
		}
	}
	return -1
}

// scalar decodes a plain, single-quoted or double-quoted scalar.
func scalar(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	switch s[0] {
	case '"', '\'':
		end := closingQuote(s)
		if end < 0 {
			return "", fmt.Errorf("unterminated quoted scalar %s", s)
		}
		if tail := strings.TrimSpace(s[end+1:]); tail != "" && !strings.HasPrefix(tail, "#") {
			return "", fmt.Errorf("text after the quoted scalar %s", s)
		}
		body := s[:end+1]
		if s[0] == '\'' {
			return strings.ReplaceAll(body[1:len(body)-1], "''", "'"), nil
		}
		v, err := strconv.Unquote(body)
		if err != nil {
			return "", fmt.Errorf("double-quoted scalar %s: %w", body, err)
		}
		return v, nil
	case '|', '>', '&', '*', '!', '%', '@', '`':
		return "", fmt.Errorf("unsupported scalar %q", s)
	}
	return stripComment(s), nil
}

// workflowStep is one step of a job, as the rebake loop needs it.
type workflowStep struct {
	Name string
	ID   string
	Uses string
	If   string
	Run  string
	Env  map[string]string
	With map[string]string
}

// label names a step as the Actions UI does: its name, else its action.
func (s workflowStep) label() string {
	if s.Name != "" {
		return s.Name
	}
	if s.Uses != "" {
		return s.Uses
	}
	return "run: " + strings.SplitN(s.Run, "\n", 2)[0]
}

// workflowJob is one job: its env, timeout-minutes and steps.
type workflowJob struct {
	Env            map[string]string
	TimeoutMinutes string
	Steps          []workflowStep
}

// parseWorkflow reads a GitHub Actions workflow: the top-level env and each job's env and steps.
func parseWorkflow(text string) (env map[string]string, jobs map[string]workflowJob, err error) {
	root, err := parseYAML(text)
	if err != nil {
		return nil, nil, err
	}
	if root.Kind != yamlMapping {
		return nil, nil, fmt.Errorf("the workflow is not a mapping")
	}
	if env, err = root.get("env").strMap(); err != nil {
		return nil, nil, fmt.Errorf("env: %w", err)
	}
	js := root.get("jobs")
	if js == nil || js.Kind != yamlMapping {
		return nil, nil, fmt.Errorf("no jobs mapping")
	}
	jobs = map[string]workflowJob{}
	for _, name := range js.Keys {
		j := js.Map[name]
		job := workflowJob{TimeoutMinutes: j.get("timeout-minutes").str()}
		if job.Env, err = j.get("env").strMap(); err != nil {
			return nil, nil, fmt.Errorf("jobs.%s.env: %w", name, err)
		}
		steps := j.get("steps")
		if steps == nil || steps.Kind != yamlSequence {
			return nil, nil, fmt.Errorf("jobs.%s has no steps sequence", name)
		}
		for i, s := range steps.Items {
			if s.Kind != yamlMapping {
				return nil, nil, fmt.Errorf("jobs.%s.steps[%d] (line %d) is not a mapping", name, i, s.Line)
			}
			st := workflowStep{Name: s.get("name").str(), ID: s.get("id").str(), Uses: s.get("uses").str(), If: s.get("if").str(), Run: s.get("run").str()}
			if st.Env, err = s.get("env").strMap(); err != nil {
				return nil, nil, fmt.Errorf("jobs.%s.steps[%d].env: %w", name, i, err)
			}
			if st.With, err = s.get("with").strMap(); err != nil {
				return nil, nil, fmt.Errorf("jobs.%s.steps[%d].with: %w", name, i, err)
			}
			if (st.Run == "") == (st.Uses == "") {
				return nil, nil, fmt.Errorf("jobs.%s.steps[%d] (line %d) needs exactly one of run and uses", name, i, s.Line)
			}
			job.Steps = append(job.Steps, st)
		}
		jobs[name] = job
	}
	return env, jobs, nil
}
