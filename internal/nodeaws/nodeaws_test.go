package nodeaws

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
	"github.com/dlami-bake/packer-plugin-dlami/test/imdsfake"
)

const (
	region     = "us-west-2"
	instanceID = "i-0fa11edc0ffee0001"
	roleKey    = "ASIAINSTANCEROLE0001"
)

// setup is a fake AWS (S3 and Auto Scaling) and an IMDSv2 stand-in whose role signs the
// calls; the SDK reaches the fake through AWS_ENDPOINT_URL, as on a node it would reach AWS.
func setup(t *testing.T) (*awsfake.Server, *imdsfake.Server, *Client) {
	t.Helper()
	awstest.IsolateEnv(t)
	fake := awsfake.New()
	srv := fake.Start()
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	// IsolateEnv turns IMDS off for the SDK's chain; the node check's client enables it itself.
	md := imdsfake.New(imdsfake.Instance{InstanceID: instanceID, InstanceType: "p5.48xlarge", AvailabilityZone: region + "b",
		Region: region, ImageID: "ami-0golden0000000001", AccountID: awsfake.DefaultAccount, Role: "gpu-node",
		AccessKeyID: roleKey, SecretAccessKey: "fakeRoleSecret000000000000000000000000000"})
	mdSrv := httptest.NewServer(md)
	t.Cleanup(mdSrv.Close)
	return fake, md, New(Options{IMDSEndpoint: mdSrv.URL})
}

func TestIdentity(t *testing.T) {
	_, md, c := setup(t)
	id, err := c.Identity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if id.InstanceID != instanceID || id.Region != region || id.InstanceType != "p5.48xlarge" || id.AvailabilityZone != region+"b" || id.ImageID != "ami-0golden0000000001" {
		t.Errorf("identity: %+v", id)
	}
	calls := strings.Join(md.Calls(), "\n")
	if !strings.Contains(calls, "PUT /latest/api/token 200") || !strings.Contains(calls, "GET /latest/dynamic/instance-identity/document 200") {
		t.Errorf("IMDSv2 calls:\n%s", calls)
	}
	md.SetDown(true)
	if _, err := c.Identity(context.Background()); err == nil || !strings.Contains(err.Error(), "IMDSv2") {
		t.Errorf("an IMDS that answers 503: %v", err)
	}
}

func TestUpload(t *testing.T) {
	fake, _, c := setup(t)
	fake.CreateBucket(region, "gpu-evidence")
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	body := strings.Repeat("evidence ", 100_000) // ~900 KB
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	key := "fleet/" + instanceID + "/b.tar.gz"
	if err := c.Upload(context.Background(), region, "gpu-evidence", key, path, map[string]string{"dlami-simulated": "gpu"}); err != nil {
		t.Fatal(err)
	}
	o, ok := fake.Object("gpu-evidence", key)
	if !ok || string(o.Body) != body || o.Metadata["dlami-simulated"] != "gpu" || o.ContentType != "application/gzip" {
		t.Fatalf("object: ok %v, %d bytes, metadata %v, type %q", ok, len(o.Body), o.Metadata, o.ContentType)
	}
	var signed bool
	for _, call := range fake.Calls() {
		if call.Op == awsfake.OpPutObject && call.AccessKeyID == roleKey && call.Status == 200 {
			signed = true
		}
	}
	if !signed {
		t.Errorf("PutObject was not signed with the instance role's key: %+v", fake.Calls())
	}
	// Failures come back as errors naming the call and S3's code.
	if err := c.Upload(context.Background(), region, "no-such-bucket", key, path, nil); err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("upload to a missing bucket: %v", err)
	}
	fake.CreateBucket("eu-west-1", "elsewhere")
	if err := c.Upload(context.Background(), region, "elsewhere", key, path, nil); err == nil || !strings.Contains(err.Error(), "AuthorizationHeaderMalformed") {
		t.Errorf("upload to a bucket of another region: %v", err)
	}
	fake.SetFault(awsfake.OpPutObject, "", awsfake.Fault{AccessDenied: true})
	if err := c.Upload(context.Background(), region, "gpu-evidence", key+"2", path, nil); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("denied upload: %v", err)
	}
}

func TestMarkUnhealthy(t *testing.T) {
	fake, _, c := setup(t)
	// In no group: nothing is asked, and the outcome says so.
	o, err := c.MarkUnhealthy(context.Background(), region, instanceID, true)
	if err != nil || o.Requested || !strings.Contains(o.Message, "in no Auto Scaling group") {
		t.Fatalf("outside a group: %+v %v", o, err)
	}
	if n := fake.CallCount(awsfake.OpSetInstanceHealth, ""); n != 0 {
		t.Errorf("SetInstanceHealth called %d times for an instance in no group", n)
	}
	fake.PutAutoScalingGroup(region, "p5-workers", instanceID)
	// A drill (send false): the group is found, nothing is sent.
	o, err = c.MarkUnhealthy(context.Background(), region, instanceID, false)
	if err != nil || o.Requested || !o.WouldRequest || o.Group != "p5-workers" || !strings.Contains(o.Message, "would mark instance "+instanceID+" Unhealthy in Auto Scaling group p5-workers") {
		t.Fatalf("drill: %+v %v", o, err)
	}
	if fake.CallCount(awsfake.OpSetInstanceHealth, "") != 0 || fake.CallCount(awsfake.OpDescribeAutoScalingInstances, "") != 2 {
		t.Errorf("drill calls: %+v", fake.Calls())
	}
	o, err = c.MarkUnhealthy(context.Background(), region, instanceID, true)
	if err != nil || !o.Requested || o.WouldRequest || o.Group != "p5-workers" {
		t.Fatalf("in a group: %+v %v", o, err)
	}
	in, _ := fake.AutoScalingInstance(region, instanceID)
	if len(in.HealthCalls) != 1 || in.HealthCalls[0].HealthStatus != "Unhealthy" || in.HealthCalls[0].RespectGracePeriod || in.HealthStatus != "UNHEALTHY" {
		t.Errorf("the group's record: %+v", in)
	}
	// Asked again (another run), it is not asked twice.
	o, err = c.MarkUnhealthy(context.Background(), region, instanceID, true)
	if err != nil || o.Requested || !strings.Contains(o.Message, "Terminating") {
		t.Errorf("again: %+v %v", o, err)
	}
	if in, _ := fake.AutoScalingInstance(region, instanceID); len(in.HealthCalls) != 1 {
		t.Errorf("SetInstanceHealth sent again: %+v", in.HealthCalls)
	}
	fake.PutAutoScalingGroup(region, "p5-workers", "i-0denied")
	fake.SetFault(awsfake.OpSetInstanceHealth, "", awsfake.Fault{AccessDenied: true})
	if _, err := c.MarkUnhealthy(context.Background(), region, "i-0denied", true); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("denied: %v", err)
	}
	served := strings.Join(fake.ActionsServed(), " ")
	for _, a := range []string{"autoscaling:DescribeAutoScalingInstances", "autoscaling:SetInstanceHealth"} {
		if !strings.Contains(served, a) {
			t.Errorf("actions served %q lack %s", served, a)
		}
	}
}
