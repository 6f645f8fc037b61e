package dlami

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	packersdk "github.com/hashicorp/packer-plugin-sdk/packer"

	"github.com/dlami-bake/packer-plugin-dlami/internal/amitags"
	"github.com/dlami-bake/packer-plugin-dlami/internal/launch"
	"github.com/dlami-bake/packer-plugin-dlami/internal/report"
	"github.com/dlami-bake/packer-plugin-dlami/internal/result"
	"github.com/dlami-bake/packer-plugin-dlami/internal/settings"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
)

// fakeClock is a settable clock for the fake's EC2 times.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// bake does what amazon-ebs does before the post-processor runs, on the fake's clock: it
// launches a build instance, lets it run for took, makes the AMI from it (CreateImage) and
// terminates it. It returns the AMI.
func bake(t *testing.T, f fakeEC2, clock *fakeClock, typ string, took time.Duration) string {
	t.Helper()
	ctx := context.Background()
	c := ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(f.url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEPPTEST000000", "secret", "")})
	source := awsfake.SeedAMIID("us-east-1", awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", awsfake.SeedBuilds[len(awsfake.SeedBuilds)-1]))
	run, err := c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(source), InstanceType: "p5.48xlarge", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(run.Instances[0].InstanceId)
	if typ != "p5.48xlarge" {
		t.Fatalf("the build type is p5.48xlarge here, not %s", typ)
	}
	// The fake moves the instance to running when it is described.
	if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	clock.advance(took)
	img, err := c.CreateImage(ctx, &ec2.CreateImageInput{InstanceId: aws.String(id), Name: aws.String("golden")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(img.ImageId)}}); err != nil {
		t.Fatal(err)
	}
	clock.advance(3 * time.Minute) // Packer's own steps between the build and the post-processor
	return aws.ToString(img.ImageId)
}

// costRig is a post-processor against the fake with a settable clock, whose verification
// (checkBoot) takes verifyTook on that clock, and whose Price List API is the fake's.
func costRig(t *testing.T, raw map[string]interface{}, verifyTook time.Duration) (fakeEC2, *fakeClock, *PostProcessor) {
	t.Helper()
	f := newFakeEC2(t, "us-east-1")
	clock := &fakeClock{now: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	f.srv.SetNow(clock.Now)
	raw["instance_type"], raw["skip_credential_validation"], raw["report_dir"] = "p5.48xlarge", true, t.TempDir()
	p, err := configure(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	p.ec2For = f.client
	p.poll, p.cleanupTimeout, p.callTimeout = 10*time.Millisecond, 10*time.Second, 5*time.Second
	p.checkBoot = func(_ context.Context, _ packersdk.Ui, _ *launch.Instance, tg target, typ string, _ func(string)) error {
		clock.advance(verifyTook)
		// The region's reports, as the engine writes them before the instance is gone.
		_, err := report.Write(filepath.Join(p.config.ReportDir, tg.region), report.Report{BuildName: "unit", InstanceType: typ,
			Checks: []result.Check{{ID: "kernel", Status: result.Pass, Expected: "7.0.0-1014-aws", Actual: "7.0.0-1014-aws"}}})
		return err
	}
	p.pricingFor = func(context.Context) (PricingAPI, error) {
		return pricing.NewFromConfig(aws.Config{Region: PricingRegion, BaseEndpoint: aws.String(f.url), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEPPTEST000000", "secret", "")}), nil
	}
	return f, clock, p
}

func readCost(t *testing.T, dir string) report.Cost {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, report.CostFileName))
	if err != nil {
		t.Fatal(err)
	}
	var c report.Cost
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// A verified bake says, last, the instance time of the build (EC2's times of the instance the
// AMI was made from) and of the verification (its instance's times), with the On-Demand list
// price from the Price List API; the same is in dlami-cost.json and, with the verified tags,
// on the AMI.
func TestCostOfAVerifiedBake(t *testing.T) {
	f, clock, p := costRig(t, map[string]interface{}{"price_lookup": true}, 9*time.Minute+3*time.Second)
	ami := bake(t, f, clock, "p5.48xlarge", 41*time.Minute+12*time.Second)
	var out bytes.Buffer
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out}
	if _, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami)); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	// 2472 s and 543 s at the fake's 55.04 $/h: $37.79 and $8.30.
	want := "dlami: instance time: build 1 × p5.48xlarge 41m12s ($37.79); verification 1 × p5.48xlarge 9m3s ($8.30); total 50m15s, $46.09 at On-Demand list price"
	if !strings.Contains(out.String(), want) {
		t.Errorf("no %q in:\n%s", want, out.String())
	}
	c := readCost(t, p.config.ReportDir)
	if !c.Build.Known || len(c.Build.Instances) != 1 || c.Build.InstanceSeconds != 2472 || c.Build.Instances[0].EndTime == nil ||
		!c.Verification.Known || c.Verification.InstanceSeconds != 543 || c.InstanceSeconds != 3015 || c.MultiNode != nil ||
		c.USD == nil || *c.USD != 46.09 || !strings.Contains(c.Price, "On-Demand list price") {
		t.Errorf("dlami-cost.json: %+v", c)
	}
	if h := c.Build.Instances[0].HourlyUSD; h == nil || *h != 55.04 {
		t.Errorf("hourly price %v", h)
	}
	img, _ := f.image("us-east-1", ami)
	for k, v := range map[string]string{amitags.Verified: "true", amitags.BuildInstanceSeconds: "2472", amitags.BuildInstanceType: "p5.48xlarge",
		amitags.VerifyInstanceSeconds: "543"} {
		if img.Tags[k] != v {
			t.Errorf("tag %s = %q, want %q (tags %v)", k, img.Tags[k], v, img.Tags)
		}
	}
	if _, ok := img.Tags[amitags.MultiNodeInstanceSeconds]; ok {
		t.Errorf("a multi-node tag without a test across nodes: %v", img.Tags)
	}
	// The reports people read carry it too: the region's Markdown and JUnit reports, and its
	// JSON report the whole dlami-cost.json.
	summary := strings.TrimPrefix(want, "dlami: ")
	dir := filepath.Join(p.config.ReportDir, "us-east-1")
	md, err := os.ReadFile(filepath.Join(dir, report.MarkdownFile))
	if err != nil || !strings.Contains(string(md), "**Instance time of the run (dlami-cost.json):** "+summary) {
		t.Errorf("%s (%v) lacks the instance time:\n%s", report.MarkdownFile, err, md)
	}
	ju, err := os.ReadFile(filepath.Join(dir, report.JUnitFile))
	if err != nil || !strings.Contains(string(ju), `<property name="instance_time" value="`+summary) ||
		!strings.Contains(string(ju), `<property name="instance_seconds" value="3015">`) || !strings.Contains(string(ju), `<property name="instance_usd" value="46.09">`) {
		t.Errorf("%s (%v) lacks the instance time:\n%s", report.JUnitFile, err, ju)
	}
	data, err := os.ReadFile(filepath.Join(dir, report.JSONFile))
	var r report.Report
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil || r.Cost == nil || r.Cost.InstanceSeconds != 3015 || r.Result != report.ResultPass || r.BuildInstance != nil {
		t.Errorf("%s (%v): cost %+v", report.JSONFile, err, r.Cost)
	}
}

// What EC2 does not give is reported unknown, with why, never guessed: an AMI that names no
// source instance has no build time, and no build tags; the verification's time and verdict
// are as before. Without price_lookup no price is asked for.
func TestUnknownBuildTimeIsSaid(t *testing.T) {
	const ami = "ami-0000000000000c031"
	f, _, p := costRig(t, map[string]interface{}{}, 2*time.Minute)
	f.own(t, "us-east-1", ami, "snap-00000000000000c31")
	var out bytes.Buffer
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out}
	if _, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami)); err != nil {
		t.Fatal(err)
	}
	want := "dlami: instance time: build unknown (" + ami + " in us-east-1 names no source instance (SourceInstanceId"
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "verification 1 × p5.48xlarge 2m0s; total 2m0s known") {
		t.Errorf("no %q in:\n%s", want, out.String())
	}
	if n := f.srv.CallCount(awsfake.OpGetProducts, ""); n != 0 {
		t.Errorf("%d GetProducts calls without price_lookup", n)
	}
	c := readCost(t, p.config.ReportDir)
	if c.Build.Known || c.Build.Unknown == "" || c.Verification.InstanceSeconds != 120 || c.USD != nil || c.Price != "not looked up (price_lookup = false)" {
		t.Errorf("dlami-cost.json: %+v", c)
	}
	img, _ := f.image("us-east-1", ami)
	if img.Tags[amitags.Verified] != "true" || img.Tags[amitags.BuildInstanceSeconds] != "" || img.Tags[amitags.VerifyInstanceSeconds] != "120" {
		t.Errorf("tags %v", img.Tags)
	}
}

// The instance time's tags never change the verdict: an AMI whose tags are nearly full takes
// the verified tags, and the time's tagging, refused for the tag limit, is only said. A price
// the Price List API refuses is said too, and the dollars left out.
func TestCostFailuresLeaveTheVerdict(t *testing.T) {
	f, clock, p := costRig(t, map[string]interface{}{"price_lookup": true}, time.Minute)
	ami := bake(t, f, clock, "p5.48xlarge", 10*time.Minute)
	c := ec2.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(f.url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKEPPTEST000000", "secret", "")})
	var tags []ec2types.Tag
	for i := range 45 {
		tags = append(tags, ec2types.Tag{Key: aws.String(fmt.Sprintf("team:%d", i)), Value: aws.String("x")})
	}
	if _, err := c.CreateTags(context.Background(), &ec2.CreateTagsInput{Resources: []string{ami}, Tags: tags}); err != nil {
		t.Fatal(err)
	}
	f.srv.SetFault(awsfake.OpGetProducts, "", awsfake.Fault{AccessDenied: true})
	tagCalls := f.srv.CallCount(awsfake.OpCreateTags, "us-east-1")
	var out bytes.Buffer
	ui := &packersdk.BasicUi{Reader: new(bytes.Buffer), Writer: &out, ErrorWriter: &out}
	if _, _, _, err := p.PostProcess(context.Background(), ui, ebsArtifact("us-east-1:"+ami)); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	img, _ := f.image("us-east-1", ami)
	if img.Tags[amitags.Verified] != "true" || img.Tags[amitags.BuildInstanceSeconds] != "" {
		t.Errorf("tags %v", img.Tags)
	}
	for _, want := range []string{"is verified, but its instance time tags (" + amitags.BuildInstanceSeconds + " = 600", "TagLimitExceeded",
		"dlami: price: On-Demand list price", "not priced: p5.48xlarge in us-east-1: pricing:GetProducts", "AccessDeniedException",
		"build 1 × p5.48xlarge 10m0s; verification 1 × p5.48xlarge 1m0s; total 11m0s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	// The verdict's tagging and one refused tagging of the time: TagLimitExceeded is not retried.
	if n := f.srv.CallCount(awsfake.OpCreateTags, "us-east-1") - tagCalls; n != 2 {
		t.Errorf("%d CreateTags calls, want 2", n)
	}
	if strings.Contains(out.String(), "NOT TAGGED") {
		t.Errorf("the instance time's tags were reported as the verdict's:\n%s", out.String())
	}
}

// The share of the test across nodes is each node's time in it, as the multi-node report of
// this run says, for the nodes this run launched only.
func TestMultiNodePhase(t *testing.T) {
	dir := t.TempDir()
	c := &Config{Nodes: 2, ReportDir: dir, multi: settings.MultiNode{Nodes: 2}}
	r := report.Report{Launch: &report.Launch{Nodes: []report.LaunchNode{
		{InstanceID: "i-1", InstanceType: "p5.48xlarge", TestSeconds: 70.2},
		{InstanceID: "i-2", InstanceType: "p5.48xlarge", TestSeconds: 70.2},
		{InstanceID: "i-old", InstanceType: "p5.48xlarge", TestSeconds: 900},
	}}}
	data, _ := json.Marshal(r)
	if err := os.MkdirAll(filepath.Join(dir, "us-east-1", "multi-node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "us-east-1", "multi-node", report.JSONFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	ran := []ranNode{{"us-east-1", launch.Lifetime{InstanceID: "i-1", InstanceType: "p5.48xlarge"}}, {"us-east-1", launch.Lifetime{InstanceID: "i-2", InstanceType: "p5.48xlarge"}}}
	ph := c.multiNodePhase(ran)
	if ph == nil || !ph.Known || len(ph.Instances) != 2 || math.Abs(ph.InstanceSeconds-140.4) > 1e-9 {
		t.Fatalf("%+v", ph)
	}
	if (&Config{Nodes: 1, ReportDir: dir}).multiNodePhase(ran) != nil || (&Config{Nodes: 2, ReportDir: t.TempDir(), multi: settings.MultiNode{Nodes: 2}}).multiNodePhase(ran) != nil {
		t.Error("a multi-node phase without a test across nodes")
	}
	line := costLine(report.Cost{Build: report.CostPhase{Known: true, InstanceSeconds: 2472, Instances: []report.CostInstance{{InstanceType: "p5.48xlarge"}}},
		Verification: report.CostPhase{Known: true, InstanceSeconds: 1086, Instances: []report.CostInstance{{InstanceType: "p5.48xlarge"}, {InstanceType: "p5.48xlarge", InstanceID: "i-2", StillRunning: true}}},
		MultiNode:    ph, InstanceSeconds: 3558})
	want := "instance time: build 1 × p5.48xlarge 41m12s; verification 2 × p5.48xlarge 18m6s (i-2 still running: counted until now) (multi-node test 2m20s of it); total 59m18s"
	if line != want {
		t.Errorf("costLine:\n got %s\nwant %s", line, want)
	}
}

func TestParseOnDemandHourly(t *testing.T) {
	for _, tc := range []struct {
		entry string
		want  []float64
		err   bool
	}{
		{`{"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"55.0400000000"}}}}}}}`, []float64{55.04}, false},
		{`{"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"GB-Mo","pricePerUnit":{"USD":"0.08"}}}}}}}`, nil, false},
		{`{"terms":{"Reserved":{}}}`, nil, false},
		{`{"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"free"}}}}}}}`, nil, true},
		{`{"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"-1"}}}}}}}`, nil, true},
		{`{"product":`, nil, true},
	} {
		got, err := ParseOnDemandHourly(tc.entry)
		if (err != nil) != tc.err || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, %v; want %v (error %v)", tc.entry, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseOnDemandHourly(f *testing.F) {
	f.Add(`{"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"55.04"}}}}}}}`)
	f.Add(`{"terms":{"OnDemand":{"S.T":{"priceDimensions":{"S.T.R":{"unit":"Hrs","pricePerUnit":{"USD":"NaN"}}}}}}}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, entry string) {
		got, err := ParseOnDemandHourly(entry)
		if err != nil && got != nil {
			t.Errorf("%q: prices %v with an error", entry, got)
		}
		for _, usd := range got {
			if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
				t.Errorf("%q: price %v", entry, usd)
			}
		}
	})
}
