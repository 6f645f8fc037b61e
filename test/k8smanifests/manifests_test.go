// Package k8smanifests validates the Kubernetes manifests this repository ships (every YAML
// document with an apiVersion and a kind under examples/ and deploy/) with Kubernetes' own
// code: strict decoding into the k8s.io/api types (an unknown or misspelt field, a duplicate
// key or a wrong type fails), and apimachinery's validation of object names, namespaces,
// label keys and values, node selectors, tolerations and taints; then the references between
// them (the ServiceAccount a DaemonSet runs as, the ConfigMap it mounts, the role a binding
// names) and the rules node-problem-detector needs.
package k8smanifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/dlami-bake/packer-plugin-dlami/internal/nodeconf"
)

// manifestDirs are where the repository ships manifests.
var manifestDirs = []string{"examples", "deploy"}

// object is one decoded document.
type object struct {
	where string // file:document
	meta  metav1.TypeMeta
	obj   any
}

// set is every object of a manifest set, by kind.
type set struct {
	objects []object
}

func (s set) find(kind, namespace, name string) bool {
	for _, o := range s.objects {
		if o.meta.Kind != kind {
			continue
		}
		m := objectMeta(o.obj)
		if m.Name == name && (namespace == "" || m.Namespace == namespace) {
			return true
		}
	}
	return false
}

func objectMeta(o any) metav1.ObjectMeta {
	switch v := o.(type) {
	case *appsv1.DaemonSet:
		return v.ObjectMeta
	case *corev1.ConfigMap:
		return v.ObjectMeta
	case *corev1.ServiceAccount:
		return v.ObjectMeta
	case *rbacv1.ClusterRole:
		return v.ObjectMeta
	case *rbacv1.ClusterRoleBinding:
		return v.ObjectMeta
	}
	return metav1.ObjectMeta{}
}

// newObject is the Go type of a kind this repository ships; a kind not here fails, so a new
// manifest is never passed unvalidated.
func newObject(m metav1.TypeMeta) (any, error) {
	switch m.APIVersion + " " + m.Kind {
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}, nil
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a type this test decodes; add it to newObject", m.APIVersion, m.Kind)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// decode splits a file into documents and decodes every Kubernetes object strictly.
func decode(where string, data []byte) ([]object, []error) {
	var out []object
	var errs []error
	for i, doc := range docSep.Split(string(data), -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		at := fmt.Sprintf("%s: document %d", where, i)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", at, err))
			continue
		}
		if tm.APIVersion == "" || tm.Kind == "" {
			continue // not a Kubernetes object (a Prometheus rule file, a workflow)
		}
		obj, err := newObject(tm)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", at, err))
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			errs = append(errs, fmt.Errorf("%s (%s): strict decoding into %T: %v", at, tm.Kind, obj, err))
			continue
		}
		out = append(out, object{where: at, meta: tm, obj: obj})
	}
	return out, errs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// validate checks every object and the references between them.
func validate(s set) field.ErrorList {
	var errs field.ErrorList
	for _, o := range s.objects {
		root := field.NewPath(o.where)
		m := objectMeta(o.obj)
		errs = append(errs, validateMeta(m, o.meta.Kind, root.Child("metadata"))...)
		switch v := o.obj.(type) {
		case *appsv1.DaemonSet:
			errs = append(errs, validateDaemonSet(s, v, root.Child("spec"))...)
		case *rbacv1.ClusterRole:
			for i, r := range v.Rules {
				if len(r.Verbs) == 0 || len(r.Resources) == 0 {
					errs = append(errs, field.Required(root.Child("rules").Index(i), "verbs and resources"))
				}
			}
		case *rbacv1.ClusterRoleBinding:
			if v.RoleRef.Kind != "ClusterRole" || v.RoleRef.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.Invalid(root.Child("roleRef"), v.RoleRef, "a ClusterRole of rbac.authorization.k8s.io"))
			} else if !strings.HasPrefix(v.RoleRef.Name, "system:") && !s.find("ClusterRole", "", v.RoleRef.Name) {
				errs = append(errs, field.NotFound(root.Child("roleRef", "name"), v.RoleRef.Name))
			}
			for i, sub := range v.Subjects {
				if sub.Kind == rbacv1.ServiceAccountKind && !s.find("ServiceAccount", sub.Namespace, sub.Name) {
					errs = append(errs, field.NotFound(root.Child("subjects").Index(i), sub.Namespace+"/"+sub.Name))
				}
			}
		}
	}
	return errs
}

// validateMeta: the name as the kind's registry validates it (a DNS subdomain; RBAC objects
// may also hold ':', which path-segment validation allows), the namespace a DNS label, the
// labels and annotations as apimachinery validates them.
func validateMeta(m metav1.ObjectMeta, kind string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	nameErrs := validation.IsDNS1123Subdomain(m.Name)
	if strings.HasPrefix(kind, "ClusterRole") {
		// RBAC names are path segments (pkg/apis/rbac/validation: ValidateRBACName).
		nameErrs = path.ValidatePathSegmentName(m.Name, false)
	}
	for _, e := range nameErrs {
		errs = append(errs, field.Invalid(p.Child("name"), m.Name, e))
	}
	if m.Namespace != "" {
		for _, e := range validation.IsDNS1123Label(m.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), m.Namespace, e))
		}
	}
	errs = append(errs, metavalidation.ValidateLabels(m.Labels, p.Child("labels"))...)
	for k := range m.Annotations {
		for _, e := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(p.Child("annotations").Key(k), k, e))
		}
	}
	return errs
}

func validateDaemonSet(s set, d *appsv1.DaemonSet, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, metavalidation.ValidateLabelSelector(d.Spec.Selector, metavalidation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		errs = append(errs, field.Invalid(p.Child("selector"), d.Spec.Selector, err.Error()))
	} else if sel.Empty() || !sel.Matches(labelSet(d.Spec.Template.Labels)) {
		errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), d.Spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, metavalidation.ValidateLabels(d.Spec.Template.Labels, p.Child("template", "metadata", "labels"))...)
	pod := d.Spec.Template.Spec
	pp := p.Child("template", "spec")
	// A nodeSelector's keys and values are label keys and values.
	errs = append(errs, metavalidation.ValidateLabels(pod.NodeSelector, pp.Child("nodeSelector"))...)
	for i, t := range pod.Tolerations {
		errs = append(errs, validateToleration(t, pp.Child("tolerations").Index(i))...)
	}
	if sa := pod.ServiceAccountName; sa != "" && !s.find("ServiceAccount", d.Namespace, sa) {
		errs = append(errs, field.NotFound(pp.Child("serviceAccountName"), d.Namespace+"/"+sa))
	}
	vols := map[string]bool{}
	for i, v := range pod.Volumes {
		for _, e := range validation.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(pp.Child("volumes").Index(i).Child("name"), v.Name, e))
		}
		vols[v.Name] = true
		if v.ConfigMap != nil && !s.find("ConfigMap", d.Namespace, v.ConfigMap.Name) {
			errs = append(errs, field.NotFound(pp.Child("volumes").Index(i).Child("configMap", "name"), d.Namespace+"/"+v.ConfigMap.Name))
		}
	}
	for i, c := range pod.Containers {
		cp := pp.Child("containers").Index(i)
		for _, e := range validation.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(cp.Child("name"), c.Name, e))
		}
		if c.Image == "" {
			errs = append(errs, field.Required(cp.Child("image"), ""))
		}
		for j, m := range c.VolumeMounts {
			if !vols[m.Name] {
				errs = append(errs, field.NotFound(cp.Child("volumeMounts").Index(j).Child("name"), m.Name))
			}
		}
		for j, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(cp.Child("env").Index(j).Child("name"), e.Name, msg))
			}
		}
	}
	return errs
}

// validateToleration is the API server's toleration rules (pkg/apis/core/validation,
// validateTolerations) over apimachinery's key validation: a key is a qualified name, an empty
// key needs operator Exists, Exists takes no value, Equal's value is a label value, and the
// effect is one of the taint effects.
func validateToleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metavalidation.ValidateLabelName(t.Key, p.Child("key"))...)
	}
	switch t.Operator {
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when `operator` is 'Exists'"))
		}
	case corev1.TolerationOpEqual, "":
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "operator must be Exists when `key` is empty"))
		}
		for _, e := range validation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, e))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{string(corev1.TolerationOpEqual), string(corev1.TolerationOpExists)}))
	}
	if t.Effect != "" && !slices.Contains([]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}, t.Effect) {
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
	}
	return errs
}

// taintRE is a taint as the manifests' comments tell the reader to set it:
// `kubectl taint nodes <node> KEY=VALUE:EFFECT`.
var taintRE = regexp.MustCompile(`kubectl taint nodes \S+ ([^=\s]+)=([^:\s]*):(\S+)`)

// validateTaints checks every taint a manifest's comments give, as the API server checks a
// node's taints: the key a qualified name, the value a label value, a known effect.
func validateTaints(where string, data []byte) field.ErrorList {
	var errs field.ErrorList
	for _, m := range taintRE.FindAllStringSubmatch(string(data), -1) {
		p := field.NewPath(where).Child("taint")
		errs = append(errs, metavalidation.ValidateLabelName(m[1], p.Child("key"))...)
		for _, e := range validation.IsValidLabelValue(m[2]) {
			errs = append(errs, field.Invalid(p.Child("value"), m[2], e))
		}
		if !slices.Contains([]string{"NoSchedule", "PreferNoSchedule", "NoExecute"}, m[3]) {
			errs = append(errs, field.NotSupported(p.Child("effect"), m[3], []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}))
		}
	}
	return errs
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string            { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

// shipped reads every manifest under manifestDirs.
func shipped(t *testing.T) (set, map[string][]byte) {
	t.Helper()
	var s set
	files := map[string][]byte{}
	for _, dir := range manifestDirs {
		err := filepath.WalkDir(filepath.Join("..", "..", dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join("..", ".."), path)
			objs, errs := decode(rel, data)
			for _, e := range errs {
				t.Error(e)
			}
			if len(objs) > 0 {
				files[rel] = data
			}
			s.objects = append(s.objects, objs...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return s, files
}

// TestShippedManifests: every shipped manifest decodes strictly and validates; the node
// problem detector's set is all there (ServiceAccount, ClusterRole, binding, ConfigMap,
// DaemonSet).
func TestShippedManifests(t *testing.T) {
	s, files := shipped(t)
	if len(files) == 0 {
		t.Fatal("the walk found no manifest to validate")
	}
	for _, e := range validate(s) {
		t.Error(e)
	}
	for where, data := range files {
		for _, e := range validateTaints(where, data) {
			t.Error(e)
		}
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet"} {
		if !slices.ContainsFunc(s.objects, func(o object) bool {
			return o.meta.Kind == kind && objectMeta(o.obj).Name == "node-problem-detector-dlami"
		}) {
			t.Errorf("no %s node-problem-detector-dlami shipped", kind)
		}
	}
	// The node check reaches IMDSv2 (identity, evidence upload, the Auto Scaling group) with the
	// instance role: from the node's network, where a hop limit of 1 still answers.
	for _, o := range s.objects {
		if d, ok := o.obj.(*appsv1.DaemonSet); ok && d.Name == "node-problem-detector-dlami" {
			if spec := d.Spec.Template.Spec; !spec.HostNetwork || spec.DNSPolicy != "ClusterFirstWithHostNet" {
				t.Errorf("DaemonSet %s: hostNetwork %v, dnsPolicy %q: want the node's network (IMDSv2 with a hop limit of 1) and cluster DNS", d.Name, spec.HostNetwork, spec.DNSPolicy)
			}
		}
	}
}

// TestNPDRole: the ClusterRole grants what node-problem-detector does (get its node, patch the
// node's status, record events, as Kubernetes' bootstrap role system:node-problem-detector),
// and no write to nodes themselves.
func TestNPDRole(t *testing.T) {
	s, _ := shipped(t)
	for _, o := range s.objects {
		r, ok := o.obj.(*rbacv1.ClusterRole)
		if !ok || r.Name != "node-problem-detector-dlami" {
			continue
		}
		allows := func(group, resource, verb string) bool {
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
					return true
				}
			}
			return false
		}
		for _, need := range [][3]string{{"", "nodes", "get"}, {"", "nodes/status", "patch"}, {"", "events", "create"}, {"", "events", "patch"}, {"events.k8s.io", "events", "create"}} {
			if !allows(need[0], need[1], need[2]) {
				t.Errorf("the role does not allow %s on %s (group %q)", need[2], need[1], need[0])
			}
		}
		for _, verb := range []string{"patch", "update", "delete", "*"} {
			if allows("", "nodes", verb) {
				t.Errorf("the role allows %s on nodes: node-problem-detector only patches their status", verb)
			}
		}
		return
	}
	t.Fatal("no ClusterRole node-problem-detector-dlami")
}

// TestNPDConfigMapIsThePlugins: the ConfigMap's monitor config is what the image installs
// (nodeconf.NPDConfig with the provisioner's defaults), with the binary reached through
// chroot: same conditions, rules, timeouts and limits.
func TestNPDConfigMapIsThePlugins(t *testing.T) {
	s, _ := shipped(t)
	var cm *corev1.ConfigMap
	for _, o := range s.objects {
		if c, ok := o.obj.(*corev1.ConfigMap); ok && c.Name == "node-problem-detector-dlami" {
			cm = c
		}
	}
	if cm == nil {
		t.Fatal("no ConfigMap node-problem-detector-dlami")
	}
	var got, want map[string]any
	if err := json.Unmarshal([]byte(cm.Data["dlami-node-check.json"]), &got); err != nil {
		t.Fatalf("the ConfigMap's JSON: %v", err)
	}
	img := nodeconf.NPDConfig(nodeconf.Config{Timeout: nodeconf.DefaultTimeout})
	if err := json.Unmarshal(img, &want); err != nil {
		t.Fatal(err)
	}
	rule := want["rules"].([]any)[0].(map[string]any)
	rule["args"] = append([]any{"/host", rule["path"]}, rule["args"].([]any)...)
	rule["path"] = "/usr/sbin/chroot"
	g, _ := json.MarshalIndent(got, "", "  ")
	w, _ := json.MarshalIndent(want, "", "  ")
	if !bytes.Equal(g, w) {
		t.Errorf("the ConfigMap's monitor config:\n%s\nthe image's, through chroot:\n%s", g, w)
	}
}

// TestValidationRejects: the checks fail what the API server rejects, among them the two
// faults the example once had (a label key with ':', a ServiceAccount nothing creates).
func TestValidationRejects(t *testing.T) {
	for _, c := range []struct {
		name, doc, want string
	}{
		{"label key with a colon", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      nodeSelector: {\"dlami:node-check\": \"true\"}\n      containers: [{name: c, image: i}]\n",
			"spec.template.spec.nodeSelector: Invalid value: \"dlami:node-check\""},
		{"a ServiceAccount nothing creates", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, namespace: kube-system}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      serviceAccountName: node-problem-detector\n      containers: [{name: c, image: i}]\n",
			"serviceAccountName: Not found: \"kube-system/node-problem-detector\""},
		{"a misspelt field", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndatta: {}\n", `unknown field "datta"`},
		{"a selector that misses the template", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: x}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      containers: [{name: c, image: i}]\n",
			"`selector` does not match template `labels`"},
		{"a bad toleration", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\nspec:\n  selector: {matchLabels: {app: d}}\n  template:\n    metadata: {labels: {app: d}}\n    spec:\n      tolerations: [{operator: Exists, value: \"x\", effect: NoScheduleNow}]\n      containers: [{name: c, image: i}]\n",
			"must be empty when `operator` is 'Exists'"},
		{"an upper-case name", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: NPD, namespace: kube-system}\n", "metadata.name: Invalid value: \"NPD\""},
		{"an unknown kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n", "not a type this test decodes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			objs, errs := decode("x.yaml", []byte(c.doc))
			all := fmt.Sprint(errs)
			for _, e := range validate(set{objects: objs}) {
				all += "\n" + e.Error()
			}
			if !strings.Contains(all, c.want) {
				t.Errorf("errors:\n%s\nwant %q", all, c.want)
			}
		})
	}
	if errs := validateTaints("x", []byte("kubectl taint nodes n dlami:node-check=failed:NoSchedule")); len(errs) == 0 {
		t.Error("a taint key with ':' passed")
	}
	if errs := validateTaints("x", []byte("kubectl taint nodes n dlami.dev/node-check=failed:NoSchedule")); len(errs) != 0 {
		t.Errorf("a valid taint failed: %v", errs)
	}
}
