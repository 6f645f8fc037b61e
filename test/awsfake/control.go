package awsfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The control API lets tests and demos steer the fake over HTTP on the same
// port as the AWS endpoints. It is never an AWS action: paths start with
// /_fake/, requests need no signature, answers are JSON.
//
//	GET    /_fake/state[?region=R][&owner=self]   everything the fake holds (StateDump)
//	POST   /_fake/publish?build=YYYYMMDD[&region=R] publish a DLAMI build (PublishResult)
//	POST   /_fake/deprecate?image=ami-…[&region=R][&at=RFC3339]  deprecate an image
//	POST   /_fake/fault?spec=OP[@REGION]=KIND[:N],…  install a fault (ParseFault syntax)
//	DELETE /_fake/fault                              clear every fault
//
// Errors answer 4xx with {"error": "..."}.
const controlPrefix = "/_fake/"

// BaseDLAMIParameter is the SSM parameter publish points at the new build.
const BaseDLAMIParameter = "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"

// RegionState is one region's contents in a StateDump.
type RegionState struct {
	Instances      []Instance      `json:"instances"`
	Images         []Image         `json:"images"`
	KeyPairs       []KeyPair       `json:"key_pairs"`
	SecurityGroups []SecurityGroup `json:"security_groups"`
	Snapshots      []Snapshot      `json:"snapshots"`
	Volumes        []Volume        `json:"volumes"`
	// NetworkInterfaces lists every interface that exists: those of instances not yet
	// terminated, and detached ones ("available", launched with DeleteOnTermination false)
	// until DeleteNetworkInterface.
	NetworkInterfaces []NetworkInterface `json:"network_interfaces"`
	PlacementGroups   []PlacementGroup   `json:"placement_groups"`
	ElasticIPs        []ElasticIP        `json:"elastic_ips"`
	Vpc               Vpc                `json:"vpc"`
	Subnet            Subnet             `json:"subnet"`
}

// StateDump is the answer of GET /_fake/state.
type StateDump struct {
	Account string                 `json:"account"`
	Regions map[string]RegionState `json:"regions"`
	// The instance time metered in the regions above (instance_seconds,
	// gpu_instance_seconds).
	InstanceUsage
	// ActionsServed is every AWS action the fake answered, in all regions, as IAM names
	// ("ec2:RunInstances"), sorted (Server.ActionsServed).
	ActionsServed []string `json:"actions_served"`
}

// State returns a copy of the fake's contents, for one region or all (""),
// with images limited to the caller's own when ownOnly is set.
func (s *Server) State(region string, ownOnly bool) StateDump {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := StateDump{Account: s.account, Regions: map[string]RegionState{}, InstanceUsage: s.usage(region), ActionsServed: sortedKeys(s.served)}
	for name, rd := range s.regions {
		if region != "" && name != region {
			continue
		}
		rs := RegionState{Vpc: rd.vpc, Subnet: rd.subnet, Instances: []Instance{}, Images: []Image{}, KeyPairs: []KeyPair{},
			SecurityGroups: []SecurityGroup{}, Snapshots: []Snapshot{}, Volumes: []Volume{},
			NetworkInterfaces: []NetworkInterface{}, PlacementGroups: []PlacementGroup{}, ElasticIPs: []ElasticIP{}}
		for _, r := range instancesInLaunchOrder(rd) {
			c := r.Instance
			c.SecurityGroupIDs = append([]string(nil), r.SecurityGroupIDs...)
			c.Volumes = append([]InstanceVolume(nil), r.Volumes...)
			c.Layers = append([]string(nil), r.Layers...)
			c.Tags = copyTags(r.Tags)
			c.NetworkInterfaces = append([]InstanceInterface(nil), r.NetworkInterfaces...)
			c.EFACards = append([]int(nil), r.EFACards...)
			c.RunningSeconds = r.meter.total(s.now()).Seconds()
			rs.Instances = append(rs.Instances, c)
		}
		for _, id := range sortedKeys(rd.images) {
			img := rd.images[id]
			if ownOnly && img.OwnerID != s.account {
				continue
			}
			rs.Images = append(rs.Images, cloneImage(*img))
		}
		for _, k := range sortedKeys(rd.keyPairs) {
			kp := *rd.keyPairs[k]
			kp.Tags = copyTags(kp.Tags)
			rs.KeyPairs = append(rs.KeyPairs, kp)
		}
		for _, id := range sortedKeys(rd.groups) {
			g := *rd.groups[id]
			g.Tags = copyTags(g.Tags)
			g.Ingress = copyPermissions(g.Ingress)
			g.Egress = copyPermissions(g.Egress)
			rs.SecurityGroups = append(rs.SecurityGroups, g)
		}
		for _, id := range sortedKeys(rd.snapshots) {
			sn := *rd.snapshots[id]
			sn.Tags = copyTags(sn.Tags)
			sn.CreateVolumeUsers = append([]string(nil), sn.CreateVolumeUsers...)
			rs.Snapshots = append(rs.Snapshots, sn)
		}
		for _, id := range sortedKeys(rd.volumes) {
			v := *rd.volumes[id]
			v.Tags = copyTags(v.Tags)
			rs.Volumes = append(rs.Volumes, v)
		}
		for _, id := range sortedKeys(rd.interfaces) {
			e := *rd.interfaces[id]
			e.Tags = copyTags(e.Tags)
			e.SecurityGroupIDs = append([]string(nil), e.SecurityGroupIDs...)
			rs.NetworkInterfaces = append(rs.NetworkInterfaces, e)
		}
		for _, id := range sortedKeys(rd.placementGroups) {
			g := *rd.placementGroups[id]
			g.Tags = copyTags(g.Tags)
			rs.PlacementGroups = append(rs.PlacementGroups, g)
		}
		for _, id := range sortedKeys(rd.addresses) {
			a := *rd.addresses[id]
			a.Tags = copyTags(a.Tags)
			rs.ElasticIPs = append(rs.ElasticIPs, a)
		}
		out.Regions[name] = rs
	}
	return out
}

// PublishResult is the answer of POST /_fake/publish.
type PublishResult struct {
	Build     string            `json:"build"`
	Name      string            `json:"name"`
	Parameter string            `json:"parameter"`
	Images    map[string]string `json:"images"` // region -> AMI id
}

// Publish registers DLAMI build (YYYYMMDD) as a public image owned by
// DLAMIOwner, with the DLAMI's naming, and points BaseDLAMIParameter at it,
// in region or, when region is "", in every region that already holds the
// parameter. The image boots the base root filesystem (no layers).
// Publishing the same build again re-points the parameter.
func (s *Server) Publish(build, region string) (PublishResult, error) {
	day, err := time.Parse("20060102", build)
	if err != nil {
		return PublishResult{}, fmt.Errorf("build %q: want the build date as YYYYMMDD (e.g. 20261101)", build)
	}
	if region != "" && !regionShape.MatchString(region) {
		return PublishResult{}, fmt.Errorf("region %q: want a region name such as us-east-1", region)
	}
	name := SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", build)
	s.mu.Lock()
	defer s.mu.Unlock()
	regions := []string{region}
	if region == "" {
		regions = nil
		for _, r := range sortedKeys(s.regions) {
			if s.regions[r].params[BaseDLAMIParameter] != nil {
				regions = append(regions, r)
			}
		}
		if len(regions) == 0 {
			return PublishResult{}, fmt.Errorf("no region holds %s yet; name one with region=", BaseDLAMIParameter)
		}
	}
	created := day.Add(9*time.Hour + 12*time.Minute + 34*time.Second)
	res := PublishResult{Build: build, Name: name, Parameter: BaseDLAMIParameter, Images: map[string]string{}}
	for _, r := range regions {
		rd := s.region(r)
		id := SeedAMIID(r, name)
		if rd.images[id] == nil {
			rd.images[id] = &Image{ID: id, Name: name,
				Description: fmt.Sprintf("Supported EC2 instances: G4dn, G5, G6, Gr6, G6e, P4d, P4de, P5, P5e, P5en, P6-B200. "+
					"Release notes: https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html (build %s)", build),
				OwnerID: DLAMIOwner, OwnerAlias: "amazon", State: "available", Architecture: "x86_64",
				CreationDate: ec2Time(created), DeprecationTime: ec2Time(created.AddDate(2, 0, 0)), RootDeviceName: "/dev/sda1", Public: true}
		}
		p := rd.params[BaseDLAMIParameter]
		if p == nil {
			p = &Parameter{Name: BaseDLAMIParameter, DataType: "text"}
			rd.params[BaseDLAMIParameter] = p
		}
		if p.Value != id {
			p.Value = id
			p.Version = max(p.Version, 1) + 1
			p.LastModified = s.now()
		}
		res.Images[r] = id
	}
	return res, nil
}

// DeprecateResult is the answer of POST /_fake/deprecate.
type DeprecateResult struct {
	Image           string   `json:"image"`
	Regions         []string `json:"regions"`
	DeprecationTime string   `json:"deprecation_time"`
}

// Deprecate sets an image's deprecation time (now when at is zero) in region
// or, when region is "", wherever an image with that id exists.
func (s *Server) Deprecate(imageID, region string, at time.Time) (DeprecateResult, error) {
	if !strings.HasPrefix(imageID, "ami-") {
		return DeprecateResult{}, fmt.Errorf("image %q: want an AMI id (ami-...)", imageID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if at.IsZero() {
		at = s.now()
	}
	res := DeprecateResult{Image: imageID, DeprecationTime: ec2Time(at), Regions: []string{}}
	for _, r := range sortedKeys(s.regions) {
		if region != "" && r != region {
			continue
		}
		if img := s.regions[r].images[imageID]; img != nil {
			img.DeprecationTime = res.DeprecationTime
			res.Regions = append(res.Regions, r)
		}
	}
	if len(res.Regions) == 0 {
		return res, fmt.Errorf("image %s not found (region %q); GET /_fake/state lists the images", imageID, region)
	}
	return res, nil
}

type controlError struct {
	status int
	err    error
}

func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	result, cerr := s.control(r)
	w.Header().Set("Content-Type", "application/json")
	if cerr != nil {
		w.WriteHeader(cerr.status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": cerr.err.Error()})
		return
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(result)
}

func (s *Server) control(r *http.Request) (any, *controlError) {
	q := r.URL.Query()
	path := strings.TrimPrefix(r.URL.Path, controlPrefix)
	want := func(methods ...string) *controlError {
		for _, m := range methods {
			if r.Method == m {
				return nil
			}
		}
		return &controlError{http.StatusMethodNotAllowed, fmt.Errorf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(methods, " or "))}
	}
	switch path {
	case "state":
		if e := want(http.MethodGet); e != nil {
			return nil, e
		}
		owner := q.Get("owner")
		if owner != "" && owner != "self" {
			return nil, &controlError{http.StatusBadRequest, fmt.Errorf("owner %q: only owner=self is supported", owner)}
		}
		return s.State(q.Get("region"), owner == "self"), nil
	case "publish":
		if e := want(http.MethodPost); e != nil {
			return nil, e
		}
		res, err := s.Publish(q.Get("build"), q.Get("region"))
		if err != nil {
			return nil, &controlError{http.StatusBadRequest, err}
		}
		return res, nil
	case "deprecate":
		if e := want(http.MethodPost); e != nil {
			return nil, e
		}
		var at time.Time
		if v := q.Get("at"); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return nil, &controlError{http.StatusBadRequest, fmt.Errorf("at %q: want an RFC 3339 time such as 2026-11-30T00:00:00Z", v)}
			}
			at = t
		}
		res, err := s.Deprecate(q.Get("image"), q.Get("region"), at)
		if err != nil {
			return nil, &controlError{http.StatusNotFound, err}
		}
		return res, nil
	case "fault":
		if e := want(http.MethodPost, http.MethodDelete); e != nil {
			return nil, e
		}
		if r.Method == http.MethodDelete {
			s.ClearFaults()
			return map[string]bool{"cleared": true}, nil
		}
		spec := q.Get("spec")
		if spec == "" {
			b, err := io.ReadAll(io.LimitReader(r.Body, 4096))
			if err != nil {
				return nil, &controlError{http.StatusBadRequest, fmt.Errorf("reading the fault spec: %w", err)}
			}
			spec = strings.TrimSpace(string(b))
		}
		op, region, f, err := ParseFault(spec)
		if err != nil {
			return nil, &controlError{http.StatusBadRequest, err}
		}
		s.SetFault(op, region, f)
		return map[string]any{"op": op, "region": region, "fault": f}, nil
	}
	return nil, &controlError{http.StatusNotFound, errors.New("unknown control path " + r.URL.Path + "; want /_fake/state, /_fake/publish, /_fake/deprecate or /_fake/fault")}
}

func copyPermissions(ps []Permission) []Permission {
	out := make([]Permission, 0, len(ps))
	for _, p := range ps {
		p.CIDRs = append([]string(nil), p.CIDRs...)
		p.GroupIDs = append([]string(nil), p.GroupIDs...)
		out = append(out, p)
	}
	return out
}
