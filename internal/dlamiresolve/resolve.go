// Package dlamiresolve finds the AWS Deep Learning AMI (DLAMI) for a family,
// OS and architecture in one or many regions, through SSM Parameter Store or
// a pinned build, and verifies what it finds before anyone bakes on it.
package dlamiresolve

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agext/levenshtein"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
)

// SSMAPI is the part of the SSM client the resolver uses.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
	GetParametersByPath(ctx context.Context, in *ssm.GetParametersByPathInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error)
}

// EC2API is the part of the EC2 client the resolver uses.
type EC2API interface {
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// Clients are the service clients for one region.
type Clients struct {
	SSM SSMAPI
	EC2 EC2API
}

// ClientFactory returns the clients for a region.
type ClientFactory func(region string) (Clients, error)

// NewClientFactory returns a ClientFactory that makes the session's SSM and EC2 clients for
// any region, once per region.
func NewClientFactory(s *awsaccess.Session) ClientFactory {
	var (
		mu    sync.Mutex
		cache = map[string]Clients{}
	)
	return func(region string) (Clients, error) {
		if region == "" {
			return Clients{}, errors.New("empty region")
		}
		mu.Lock()
		defer mu.Unlock()
		if c, ok := cache[region]; ok {
			return c, nil
		}
		c := Clients{SSM: s.SSM(region), EC2: s.EC2(region)}
		cache[region] = c
		return c, nil
	}
}

// Query says which DLAMI to resolve and how much to trust.
type Query struct {
	Architecture string // x86_64 or arm64
	OS           string
	Flavor       string
	// ParameterName replaces the path built from Architecture/Flavor/OS.
	ParameterName string
	// Build pins a YYYYMMDD build, found by name through DescribeImages.
	Build string
	// Owners are trusted image owners: account ids, "amazon" (the DLAMI
	// publisher), "self" or "aws-marketplace". Empty means ["amazon"].
	Owners          []string
	AllowDeprecated bool
	// Golden, when set, also looks up the newest AMI already baked from
	// this family, for rebake decisions.
	Golden *GoldenQuery
}

// GoldenQuery finds previously baked AMIs.
type GoldenQuery struct {
	Owners       []string          // empty means ["self"]
	NamePrefix   string            // matched as "<prefix>*"
	Tags         map[string]string // tag:<key> = value filters (wildcards allowed)
	SourceAMITag string            // tag holding the base AMI id the golden was baked from
	// IncludeUnverified counts AMIs whose first boot was not verified healthy (no
	// dlami:verified tag, or "false") as golden; by default only dlami:verified = true ones are.
	IncludeUnverified bool
}

// Image is the verified image.
type Image struct {
	ID, Name, Description, Build                       string
	CreationDate, DeprecationTime                      string
	OwnerID, OwnerAlias, Architecture, State           string
	RootDeviceName, RootDeviceType, VirtualizationType string
}

// GoldenResult is the newest golden AMI found, if any.
type GoldenResult struct {
	Found        bool
	AMIID        string
	Name         string
	CreationDate string
	SourceAMI    string // value of the source tag, "" when absent
	RebakeNeeded bool   // no golden, or its source differs from the resolved base
}

// Result is the outcome for one region.
type Result struct {
	Region                string
	Image                 Image
	ParameterName         string // "" when resolved by build
	ParameterVersion      int64
	ParameterLastModified string // RFC 3339, UTC
	Warnings              []string
	Golden                *GoldenResult
}

// Resolver resolves queries through AWS clients.
type Resolver struct {
	Clients ClientFactory
	// CallTimeout bounds each AWS operation, retries included; 0 means
	// awsaccess.DefaultCallTimeout.
	CallTimeout time.Duration
	// Now is the clock for deprecation checks; nil means time.Now.
	Now func() time.Time
	// Logf receives warnings; nil means log.Printf.
	Logf func(format string, args ...any)
	// AssumeRoleARN names the assumed role in credential errors, if any.
	AssumeRoleARN string
	// Retry is how each SSM and EC2 call is retried; see awsaccess.RetryPolicy.
	Retry awsaccess.RetryPolicy
}

func (r *Resolver) callTimeout() time.Duration {
	if r.CallTimeout > 0 {
		return r.CallTimeout
	}
	return awsaccess.DefaultCallTimeout
}

// awsCall is one AWS operation about to be sent: its deadline-bound
// context and the retryer made for it alone.
type awsCall struct {
	region, service, op string // for the log: "us-east-1", "ssm", "GetParameter"
	ctx                 context.Context
	retryer             *awsaccess.CallRetryer
	// limit names the setting whose deadline bounds the call: "timeout",
	// or "execute_timeout" when less of the whole lookup is left.
	limit string
}

// startCall bounds one operation by the per-call deadline and gives it its
// own retryer. Call finish when the operation returns.
func (r *Resolver) startCall(ctx context.Context, region, service, op string) (*awsCall, context.CancelFunc) {
	c := &awsCall{region: region, service: service, op: op, retryer: awsaccess.NewCallRetryer(r.Retry), limit: "timeout"}
	if d, ok := ctx.Deadline(); ok && d.Before(r.Retry.Time().Add(r.callTimeout())) {
		c.limit = "execute_timeout"
	}
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithTimeout(ctx, r.callTimeout())
	return c, cancel
}

func (c *awsCall) ssmRetryer(o *ssm.Options) { o.Retryer = c.retryer }
func (c *awsCall) ec2Retryer(o *ec2.Options) { o.Retryer = c.retryer }

// finish logs the call's retries, if any, and returns its statistics.
func (r *Resolver) finish(c *awsCall) awsaccess.RetryStats {
	st := c.retryer.Stats()
	if st.Retries() > 0 {
		r.logf("[INFO] dlami: %s %s %s: %s", c.service, c.op, c.region, st)
	}
	return st
}

func (r *Resolver) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Resolver) logf(format string, args ...any) {
	if r.Logf != nil {
		r.Logf(format, args...)
		return
	}
	log.Printf(format, args...)
}

func (q Query) withDefaults() Query {
	if q.Architecture == "" {
		q.Architecture = DefaultArchitecture
	}
	if q.OS == "" {
		q.OS = DefaultOS
	}
	if q.Flavor == "" {
		q.Flavor = DefaultFlavor
	}
	if len(q.Owners) == 0 {
		q.Owners = []string{"amazon"}
	}
	if q.Golden != nil {
		g := *q.Golden
		if len(g.Owners) == 0 {
			g.Owners = []string{"self"}
		}
		if g.SourceAMITag == "" {
			g.SourceAMITag = amitags.SourceAMI
		}
		q.Golden = &g
	}
	return q
}

// expectedType is the ami_type the image name must reduce to, or "" when
// a custom parameter_name gives nothing to compare with.
func (q Query) expectedType() string {
	if q.ParameterName != "" {
		_, t, ok := SplitParameterPath(q.ParameterName)
		if !ok {
			return ""
		}
		return t
	}
	return AMIType(q.Flavor, q.OS)
}

// ResolveAll resolves q in every region concurrently. Results are keyed by
// region. If any region fails, the error is a *RegionsError naming each
// failed region, and the map holds the regions that succeeded.
func (r *Resolver) ResolveAll(ctx context.Context, regions []string, q Query) (map[string]*Result, error) {
	regions = dedupe(regions)
	if len(regions) == 0 {
		return nil, errors.New("no region to resolve in: set region or regions, or AWS_REGION")
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		results = make(map[string]*Result, len(regions))
		failed  []RegionError
	)
	for _, region := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Resolve(ctx, region, q)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, RegionError{Region: region, Err: err})
				return
			}
			results[region] = res
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		sortRegionErrors(failed, regions)
		return results, &RegionsError{Total: len(regions), Failed: failed}
	}
	return results, nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s == "" || seen[s] {
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// Resolve resolves q in one region.
func (r *Resolver) Resolve(ctx context.Context, region string, q Query) (*Result, error) {
	q = q.withDefaults()
	cl, err := r.Clients(region)
	if err != nil {
		return nil, fmt.Errorf("%s: creating AWS clients: %w", region, err)
	}
	var (
		golden    *GoldenResult
		goldenErr error
		wg        sync.WaitGroup
	)
	if q.Golden != nil {
		// The golden lookup does not depend on the base image, so it runs
		// alongside it instead of adding a round trip.
		wg.Add(1)
		go func() {
			defer wg.Done()
			golden, goldenErr = r.findGolden(ctx, region, cl.EC2, *q.Golden)
		}()
	}
	res, err := r.resolveBase(ctx, region, cl, q)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if goldenErr != nil {
		return nil, goldenErr
	}
	if golden != nil {
		golden.RebakeNeeded = !golden.Found || golden.SourceAMI != res.Image.ID
		res.Golden = golden
	}
	return res, nil
}

func (r *Resolver) resolveBase(ctx context.Context, region string, cl Clients, q Query) (*Result, error) {
	res := &Result{Region: region}
	var img ec2types.Image
	if q.Build != "" {
		var err error
		img, err = r.findBuild(ctx, region, cl.EC2, q)
		if err != nil {
			return nil, err
		}
	} else {
		name := q.ParameterName
		if name == "" {
			name = ParameterPath(q.Architecture, q.Flavor, q.OS)
		}
		p, err := r.getParameter(ctx, region, cl.SSM, name, q.Architecture)
		if err != nil {
			return nil, err
		}
		res.ParameterName = name
		res.ParameterVersion = p.Version
		if p.LastModifiedDate != nil {
			res.ParameterLastModified = p.LastModifiedDate.UTC().Format(time.RFC3339)
		}
		id := aws.ToString(p.Value)
		if !strings.HasPrefix(id, "ami-") {
			return nil, fmt.Errorf("%s: SSM parameter %s holds %q, not an AMI id; is parameter_name right?", region, name, id)
		}
		img, err = r.describeByID(ctx, region, cl.EC2, id, name)
		if err != nil {
			return nil, err
		}
	}
	if err := r.verify(ctx, region, cl.EC2, q, img, res); err != nil {
		return nil, err
	}
	res.Image = imageOf(img)
	return res, nil
}

func imageOf(img ec2types.Image) Image {
	return Image{
		ID:                 aws.ToString(img.ImageId),
		Name:               aws.ToString(img.Name),
		Description:        aws.ToString(img.Description),
		Build:              ParseName(aws.ToString(img.Name)).Build,
		CreationDate:       aws.ToString(img.CreationDate),
		DeprecationTime:    aws.ToString(img.DeprecationTime),
		OwnerID:            aws.ToString(img.OwnerId),
		OwnerAlias:         aws.ToString(img.ImageOwnerAlias),
		Architecture:       string(img.Architecture),
		State:              string(img.State),
		RootDeviceName:     aws.ToString(img.RootDeviceName),
		RootDeviceType:     string(img.RootDeviceType),
		VirtualizationType: string(img.VirtualizationType),
	}
}

func (r *Resolver) getParameter(ctx context.Context, region string, c SSMAPI, name, arch string) (*ssmParameter, error) {
	call, cancel := r.startCall(ctx, region, "ssm", "GetParameter")
	defer cancel()
	out, err := c.GetParameter(call.ctx, &ssm.GetParameterInput{Name: aws.String(name)}, call.ssmRetryer)
	st := r.finish(call)
	if err != nil {
		if awsaccess.APICode(err) == "ParameterNotFound" {
			return nil, r.notFound(ctx, region, c, name, arch)
		}
		return nil, r.callError(err, call, st, "ssm:GetParameter", parameterARN(region, name))
	}
	if out.Parameter == nil {
		return nil, fmt.Errorf("%s: ssm:GetParameter %s returned no parameter", region, name)
	}
	p := out.Parameter
	return &ssmParameter{Value: p.Value, Version: p.Version, LastModifiedDate: p.LastModifiedDate}, nil
}

type ssmParameter struct {
	Value            *string
	Version          int64
	LastModifiedDate *time.Time
}

// parameterARN is the resource to grant ssm:GetParameter on. Public
// parameters under /aws/service have no account in their ARN.
func parameterARN(region, name string) string {
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return fmt.Sprintf("arn:%s:ssm:%s::parameter%s", Partition(region), region, name)
}

// Partition returns the AWS partition of a region.
func Partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	case strings.HasPrefix(region, "us-iso-"):
		return "aws-iso"
	case strings.HasPrefix(region, "us-isob-"):
		return "aws-iso-b"
	}
	return "aws"
}

// notFound lists the DLAMI parameters that do exist under the architecture
// so the error can point at the nearest one.
func (r *Resolver) notFound(ctx context.Context, region string, c SSMAPI, name, arch string) error {
	wantArch, wantType, ok := SplitParameterPath(name)
	if !ok {
		wantArch, wantType = arch, name
	}
	root := ParameterRoot + "/" + wantArch
	e := &ParameterNotFoundError{Region: region, Name: name, Searched: root}
	types := map[string]bool{}
	var token *string
	for page := 0; page < 100; page++ {
		call, cancel := r.startCall(ctx, region, "ssm", "GetParametersByPath")
		out, err := c.GetParametersByPath(call.ctx, &ssm.GetParametersByPathInput{
			Path: aws.String(root), Recursive: aws.Bool(true), MaxResults: aws.Int32(10), NextToken: token,
		}, call.ssmRetryer)
		cancel()
		st := r.finish(call)
		if err != nil {
			e.ListErr = r.callError(err, call, st, "ssm:GetParametersByPath", parameterARN(region, root))
			return e
		}
		for _, p := range out.Parameters {
			if _, t, ok := SplitParameterPath(aws.ToString(p.Name)); ok {
				types[t] = true
			}
		}
		token = out.NextToken
		if aws.ToString(token) == "" {
			break
		}
	}
	e.Available = slices.Sorted(maps.Keys(types))
	best := -1
	for _, t := range e.Available {
		d := levenshtein.Distance(wantType, t, nil)
		if best < 0 || d < best {
			best, e.Nearest = d, t
		}
	}
	return e
}

func (r *Resolver) describeByID(ctx context.Context, region string, c EC2API, id, param string) (ec2types.Image, error) {
	call, cancel := r.startCall(ctx, region, "ec2", "DescribeImages")
	defer cancel()
	// By id, EC2 returns deprecated images too; the deprecation check below
	// then decides with a clear message instead of an empty answer.
	out, err := c.DescribeImages(call.ctx, &ec2.DescribeImagesInput{ImageIds: []string{id}, IncludeDeprecated: aws.Bool(true)}, call.ec2Retryer)
	st := r.finish(call)
	if err != nil {
		if strings.HasPrefix(awsaccess.APICode(err), "InvalidAMIID") {
			return ec2types.Image{}, fmt.Errorf("%s: SSM parameter %s points at %s, which EC2 does not know in this region (deregistered, or not shared with this account): %w", region, param, id, err)
		}
		return ec2types.Image{}, r.callError(err, call, st, "ec2:DescribeImages", "*")
	}
	var found []ec2types.Image
	for _, img := range out.Images {
		if aws.ToString(img.ImageId) == id {
			found = append(found, img)
		}
	}
	if len(found) != 1 {
		return ec2types.Image{}, fmt.Errorf("%s: ec2:DescribeImages for %s (from %s) returned %d matching images, want 1 (deregistered?)", region, id, param, len(found))
	}
	return found[0], nil
}

// findBuild looks a pinned build up by name among the trusted owners' images.
func (r *Resolver) findBuild(ctx context.Context, region string, c EC2API, q Query) (ec2types.Image, error) {
	want := q.expectedType()
	pattern := "Deep Learning *" + q.Build
	images, err := r.describeAll(ctx, region, c, q.Owners, []ec2types.Filter{
		{Name: aws.String("name"), Values: []string{pattern}},
		{Name: aws.String("architecture"), Values: []string{q.Architecture}},
	})
	if err != nil {
		return ec2types.Image{}, err
	}
	var cands []ec2types.Image
	for _, img := range images {
		p := ParseName(aws.ToString(img.Name))
		if p.Build == q.Build && p.AMIType == want {
			cands = append(cands, img)
		}
	}
	if len(cands) == 0 {
		return ec2types.Image{}, r.buildNotFound(ctx, region, c, q, want)
	}
	// The "amazon" owner filter matches every Amazon-owned account; a
	// lookalike from another of them must not shadow the DLAMI publisher's.
	var trusted []ec2types.Image
	for _, img := range cands {
		if ownerTrustedLocally(region, q.Owners, img) {
			trusted = append(trusted, img)
		}
	}
	if len(trusted) > 0 {
		cands = trusted
	}
	sortNewest(cands)
	return cands[0], nil
}

// buildNotFound lists the builds of the family that do exist.
func (r *Resolver) buildNotFound(ctx context.Context, region string, c EC2API, q Query, want string) error {
	images, err := r.describeAll(ctx, region, c, q.Owners, []ec2types.Filter{
		{Name: aws.String("name"), Values: []string{"Deep Learning *"}},
		{Name: aws.String("architecture"), Values: []string{q.Architecture}},
	})
	msg := fmt.Sprintf("%s: no %s image of build %s for %s owned by %s", region, want, q.Build, q.Architecture, strings.Join(q.Owners, ", "))
	if err != nil {
		return fmt.Errorf("%s (listing other builds failed: %v)", msg, err)
	}
	builds := map[string]bool{}
	for _, img := range images {
		if p := ParseName(aws.ToString(img.Name)); p.AMIType == want && p.Build != "" {
			builds[p.Build] = true
		}
	}
	if len(builds) == 0 {
		return fmt.Errorf("%s, and no other build of that family either; check architecture, os and flavor", msg)
	}
	list := slices.Sorted(maps.Keys(builds))
	slices.Reverse(list)
	if len(list) > 10 {
		list = list[:10]
	}
	return fmt.Errorf("%s; builds available (newest first): %s", msg, strings.Join(list, ", "))
}

// describeAll pages through DescribeImages, each page under its own deadline.
func (r *Resolver) describeAll(ctx context.Context, region string, c EC2API, owners []string, filters []ec2types.Filter) ([]ec2types.Image, error) {
	var all []ec2types.Image
	var token *string
	for page := 0; page < 100; page++ {
		call, cancel := r.startCall(ctx, region, "ec2", "DescribeImages")
		out, err := c.DescribeImages(call.ctx, &ec2.DescribeImagesInput{
			Owners: owners, Filters: filters, IncludeDeprecated: aws.Bool(true), MaxResults: aws.Int32(1000), NextToken: token,
		}, call.ec2Retryer)
		cancel()
		st := r.finish(call)
		if err != nil {
			return nil, r.callError(err, call, st, "ec2:DescribeImages", "*")
		}
		all = append(all, out.Images...)
		token = out.NextToken
		if aws.ToString(token) == "" {
			break
		}
	}
	return all, nil
}

// sortNewest orders images newest first by creation date, then name, so
// the pick does not depend on the order EC2 happens to answer in.
func sortNewest(images []ec2types.Image) {
	sort.SliceStable(images, func(a, b int) bool {
		ca, cb := aws.ToString(images[a].CreationDate), aws.ToString(images[b].CreationDate)
		if ca != cb {
			return ca > cb
		}
		return aws.ToString(images[a].Name) > aws.ToString(images[b].Name)
	})
}

// verify applies the trust checks to the base image.
func (r *Resolver) verify(ctx context.Context, region string, c EC2API, q Query, img ec2types.Image, res *Result) error {
	id, name := aws.ToString(img.ImageId), aws.ToString(img.Name)
	if img.State != ec2types.ImageStateAvailable {
		return fmt.Errorf("%s: image %s (%s) is in state %q, not available (deregistered or failed); nothing to bake on", region, id, name, img.State)
	}
	if string(img.Architecture) != q.Architecture {
		return fmt.Errorf("%s: image %s (%s) is %s, but architecture = %q was asked for", region, id, name, img.Architecture, q.Architecture)
	}
	if err := r.verifyOwner(ctx, region, c, q.Owners, img); err != nil {
		return err
	}
	if want := q.expectedType(); want != "" {
		p := ParseName(name)
		if p.AMIType != want {
			return fmt.Errorf("%s: image %s is named %q, which is not the %q family that was asked for; refusing to bake on it", region, id, name, want)
		}
		if p.ARM64 != (q.Architecture == "arm64") {
			return fmt.Errorf("%s: image %s is named %q, which does not match architecture %q", region, id, name, q.Architecture)
		}
	}
	if dt := aws.ToString(img.DeprecationTime); dt != "" {
		t, err := time.Parse(time.RFC3339, dt)
		if err != nil {
			return fmt.Errorf("%s: image %s has an unreadable deprecationTime %q: %w", region, id, dt, err)
		}
		if !t.After(r.now()) {
			if !q.AllowDeprecated {
				return fmt.Errorf("%s: image %s (%s) was deprecated at %s; pick a newer build or set allow_deprecated = true", region, id, name, dt)
			}
			w := fmt.Sprintf("%s: image %s (%s) was deprecated at %s; using it because allow_deprecated = true", region, id, name, dt)
			r.logf("[WARN] dlami: %s", w)
			res.Warnings = append(res.Warnings, w)
		}
	}
	return nil
}

// verifyOwner checks the image's owner against the trusted owners. Account
// ids compare directly; "amazon" means the DLAMI publisher account in the
// commercial partition (and the "amazon" alias elsewhere, where the
// publisher account differs); "self" and other aliases are confirmed by
// asking EC2 to describe the image restricted to those owners.
func (r *Resolver) verifyOwner(ctx context.Context, region string, c EC2API, owners []string, img ec2types.Image) error {
	if ownerTrustedLocally(region, owners, img) {
		return nil
	}
	owner, alias := aws.ToString(img.OwnerId), aws.ToString(img.ImageOwnerAlias)
	var serverSide []string
	for _, o := range owners {
		if o == "self" || o == "aws-marketplace" {
			serverSide = append(serverSide, o)
		}
	}
	if len(serverSide) > 0 {
		call, cancel := r.startCall(ctx, region, "ec2", "DescribeImages")
		defer cancel()
		out, err := c.DescribeImages(call.ctx, &ec2.DescribeImagesInput{
			ImageIds: []string{aws.ToString(img.ImageId)}, Owners: serverSide, IncludeDeprecated: aws.Bool(true),
		}, call.ec2Retryer)
		st := r.finish(call)
		if err != nil && !strings.HasPrefix(awsaccess.APICode(err), "InvalidAMIID") {
			return r.callError(err, call, st, "ec2:DescribeImages", "*")
		}
		if err == nil && len(out.Images) > 0 {
			return nil
		}
	}
	who := owner
	if alias != "" {
		who += " (alias " + alias + ")"
	}
	return fmt.Errorf("%s: image %s (%s) is owned by %s, which is not a trusted owner (owners = [%s]; \"amazon\" means the DLAMI publisher %s); refusing to bake on it",
		region, aws.ToString(img.ImageId), aws.ToString(img.Name), who, strings.Join(owners, ", "), DLAMIOwnerAccount)
}

// ownerTrustedLocally applies the owner rules that need no AWS call.
func ownerTrustedLocally(region string, owners []string, img ec2types.Image) bool {
	owner, alias := aws.ToString(img.OwnerId), aws.ToString(img.ImageOwnerAlias)
	for _, o := range owners {
		switch o {
		case "amazon":
			if (Partition(region) == "aws" && owner == DLAMIOwnerAccount) || (Partition(region) != "aws" && alias == "amazon") {
				return true
			}
		case "self", "aws-marketplace":
		default:
			if owner == o {
				return true
			}
		}
	}
	return false
}

// findGolden returns the newest golden AMI matching g.
func (r *Resolver) findGolden(ctx context.Context, region string, c EC2API, g GoldenQuery) (*GoldenResult, error) {
	filters := []ec2types.Filter{{Name: aws.String("state"), Values: []string{"available"}}}
	if g.NamePrefix != "" {
		filters = append(filters, ec2types.Filter{Name: aws.String("name"), Values: []string{g.NamePrefix + "*"}})
	}
	for _, k := range slices.Sorted(maps.Keys(g.Tags)) {
		filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{g.Tags[k]}})
	}
	if _, set := g.Tags[amitags.Verified]; !set && !g.IncludeUnverified {
		// An AMI whose first boot failed or was never checked is not what the fleet runs: a
		// rebake must not be skipped because of it.
		filters = append(filters, ec2types.Filter{Name: aws.String("tag:" + amitags.Verified), Values: []string{"true"}})
	}
	images, err := r.describeAll(ctx, region, c, g.Owners, filters)
	if err != nil {
		return nil, fmt.Errorf("golden lookup: %w", err)
	}
	if len(images) == 0 {
		return &GoldenResult{}, nil
	}
	sortNewest(images)
	img := images[0]
	gr := &GoldenResult{Found: true, AMIID: aws.ToString(img.ImageId), Name: aws.ToString(img.Name), CreationDate: aws.ToString(img.CreationDate)}
	for _, t := range img.Tags {
		if aws.ToString(t.Key) == g.SourceAMITag {
			gr.SourceAMI = aws.ToString(t.Value)
		}
	}
	return gr, nil
}
