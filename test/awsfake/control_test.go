package awsfake

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

func control(t *testing.T, method, url string, body io.Reader) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, url, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	return resp.StatusCode, out
}

func ssmValue(t *testing.T, url, region string) string {
	t.Helper()
	c := ssm.New(ssm.Options{Region: region, BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKE", "secret", "")})
	out, err := c.GetParameter(context.Background(), &ssm.GetParameterInput{Name: aws.String(BaseDLAMIParameter)})
	if err != nil {
		t.Fatalf("GetParameter in %s: %v", region, err)
	}
	return aws.ToString(out.Parameter.Value)
}

func TestControlPublish(t *testing.T) {
	e := newEC2Env(t, nil)
	before := ssmValue(t, e.url, "us-east-1")
	code, out := control(t, http.MethodPost, e.url+"/_fake/publish?build=20261101", nil)
	images, _ := out["images"].(map[string]any)
	if code != 200 || out["name"] != "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261101" || len(images) != 2 {
		t.Fatalf("publish in every region: %d %v", code, out)
	}
	for _, region := range []string{"us-east-1", "us-west-2"} {
		want := dlamiID(region, "20261101")
		if images[region] != want || ssmValue(t, e.url, region) != want {
			t.Errorf("%s: published %v, parameter %s, want %s", region, images[region], ssmValue(t, e.url, region), want)
		}
		img := imageOf(t, e.client(region), want)
		if aws.ToString(img.OwnerId) != DLAMIOwner || !aws.ToBool(img.Public) || img.State != "available" || aws.ToString(img.ImageOwnerAlias) != "amazon" {
			t.Errorf("%s: published image %+v", region, img)
		}
	}
	if before == ssmValue(t, e.url, "us-east-1") {
		t.Error("the parameter did not move")
	}
	// An instance of the published build boots the base root filesystem.
	inst := e.run(t, e.client("us-east-1"), &ec2.RunInstancesInput{ImageId: aws.String(dlamiID("us-east-1", "20261101"))})
	if st := e.fake.State("us-east-1", false).Regions["us-east-1"].Instances[0]; st.ID != aws.ToString(inst.InstanceId) || len(st.Layers) != 0 {
		t.Errorf("instance of the published build: %+v", st)
	}

	tests := []struct {
		name, query string
		code        int
		want        string
	}{
		{"again is idempotent", "build=20261101", 200, "20261101"},
		{"one region", "build=20261115&region=eu-west-1", 200, "eu-west-1"},
		{"bad build", "build=2026-11-01", 400, "YYYYMMDD"},
		{"no build", "", 400, "YYYYMMDD"},
		{"bad region", "build=20261101&region=Mars", 400, "region"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out := control(t, http.MethodPost, e.url+"/_fake/publish?"+tc.query, nil)
			b, _ := json.Marshal(out)
			if code != tc.code || !strings.Contains(string(b), tc.want) {
				t.Errorf("%d %s, want %d mentioning %q", code, b, tc.code, tc.want)
			}
		})
	}
	if got := ssmValue(t, e.url, "eu-west-1"); got != dlamiID("eu-west-1", "20261115") {
		t.Errorf("eu-west-1 parameter %s after a one-region publish", got)
	}
	if got := ssmValue(t, e.url, "us-east-1"); got != dlamiID("us-east-1", "20261101") {
		t.Errorf("a one-region publish moved us-east-1 to %s", got)
	}
}

func TestControlDeprecateStateAndFaults(t *testing.T) {
	e := newEC2Env(t, nil)
	e.fake.SetNow(func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) })
	latest := dlamiID("us-east-1", "20261002")
	code, out := control(t, http.MethodPost, e.url+"/_fake/deprecate?image="+latest, nil)
	if code != 200 || out["deprecation_time"] != "2026-11-30T12:00:00.000Z" || len(out["regions"].([]any)) != 1 {
		t.Fatalf("deprecate: %d %v", code, out)
	}
	if img := imageOf(t, e.client("us-east-1"), latest); aws.ToString(img.DeprecationTime) != "2026-11-30T12:00:00.000Z" {
		t.Errorf("DescribeImages deprecation time %q", aws.ToString(img.DeprecationTime))
	}
	if code, out := control(t, http.MethodPost, e.url+"/_fake/deprecate?image=ami-0123456789abcdef0", nil); code != 404 || !strings.Contains(out["error"].(string), "not found") {
		t.Errorf("deprecate unknown: %d %v", code, out)
	}
	if code, _ := control(t, http.MethodPost, e.url+"/_fake/deprecate?image="+latest+"&at=tomorrow", nil); code != 400 {
		t.Errorf("deprecate with a bad time: %d", code)
	}

	id := aws.ToString(e.run(t, e.client("us-east-1"), &ec2.RunInstancesInput{}).InstanceId)
	resp, err := http.Get(e.url + "/_fake/state?region=us-east-1&owner=self")
	if err != nil {
		t.Fatal(err)
	}
	var st StateDump
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	rs := st.Regions["us-east-1"]
	if err != nil || st.Account != DefaultAccount || len(st.Regions) != 1 || len(rs.Instances) != 1 || rs.Instances[0].ID != id ||
		rs.Instances[0].State != StatePending || len(rs.Images) != 0 || len(rs.SecurityGroups) != 1 || len(rs.Volumes) != 1 || rs.Vpc.ID == "" {
		t.Fatalf("state: %v %+v", err, st)
	}
	code, all := control(t, http.MethodGet, e.url+"/_fake/state", nil)
	regions, _ := all["regions"].(map[string]any)
	east, _ := regions["us-east-1"].(map[string]any)
	imgs, _ := east["images"].([]any)
	if code != 200 || len(regions) != 2 || len(imgs) != 36 {
		t.Errorf("full state: %d, %d regions, %d us-east-1 images (want 36 seeded)", code, len(regions), len(imgs))
	}
	for _, key := range []string{"instances", "images", "key_pairs", "security_groups", "snapshots", "volumes"} {
		if _, ok := east[key]; !ok {
			t.Errorf("state lacks %q", key)
		}
	}

	code, out = control(t, http.MethodPost, e.url+"/_fake/fault?spec=RunInstances=capacity:1", nil)
	if code != 200 || out["op"] != "RunInstances" {
		t.Fatalf("fault: %d %v", code, out)
	}
	c := e.client("us-east-1")
	in := &ec2.RunInstancesInput{ImageId: aws.String(latest), InstanceType: "p5.48xlarge", MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}
	if _, err := c.RunInstances(context.Background(), in); errorCode(err) != "InsufficientInstanceCapacity" {
		t.Errorf("after the capacity fault: %v", err)
	}
	if code, _ := control(t, http.MethodPost, e.url+"/_fake/fault", strings.NewReader("DescribeInstances=throttle:5")); code != 200 {
		t.Errorf("fault from the body: %d", code)
	}
	if code, _ := control(t, http.MethodDelete, e.url+"/_fake/fault", nil); code != 200 {
		t.Errorf("clearing faults: %d", code)
	}
	if _, err := c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("faults not cleared: %v", err)
	}

	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, "/_fake/fault?spec=RunInstances=explode", 400},
		{http.MethodPost, "/_fake/fault?spec=DescribeImages=capacity:1", 400},
		{http.MethodGet, "/_fake/publish?build=20261101", 405},
		{http.MethodPost, "/_fake/state", 405},
		{http.MethodGet, "/_fake/state?owner=amazon", 400},
		{http.MethodGet, "/_fake/nope", 404},
	} {
		if code, out := control(t, tc.method, e.url+tc.path, nil); code != tc.code || out["error"] == "" {
			t.Errorf("%s %s: %d %v, want %d with an error", tc.method, tc.path, code, out, tc.code)
		}
	}
}

func TestGetCallerIdentity(t *testing.T) {
	e := newEC2Env(t, nil)
	client := func(creds aws.CredentialsProvider) *sts.Client {
		return sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url), RetryMaxAttempts: 1, Credentials: creds})
	}
	static := credentials.NewStaticCredentialsProvider("AKIAFAKEFAKEFAKE0001", "secret", "")
	out, err := client(static).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(out.Account) != DefaultAccount || aws.ToString(out.Arn) != "arn:aws:iam::123456789012:user/packer-ci" || aws.ToString(out.UserId) == "" {
		t.Fatalf("GetCallerIdentity: %v %+v", err, out)
	}
	ar, err := client(static).AssumeRole(context.Background(), &sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::123456789012:role/bake"), RoleSessionName: aws.String("ci")})
	if err != nil {
		t.Fatal(err)
	}
	assumed := credentials.NewStaticCredentialsProvider(aws.ToString(ar.Credentials.AccessKeyId), aws.ToString(ar.Credentials.SecretAccessKey), aws.ToString(ar.Credentials.SessionToken))
	out, err = client(assumed).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
	if err != nil || aws.ToString(out.Arn) != "arn:aws:sts::123456789012:assumed-role/bake/ci" {
		t.Fatalf("GetCallerIdentity with assumed credentials: %v %+v", err, out)
	}

	for _, tc := range []struct {
		spec, code string
	}{
		{"GetCallerIdentity=throttle:1", "Throttling"},
		{"GetCallerIdentity@us-east-1=denied", "AccessDenied"},
	} {
		op, region, f, err := ParseFault(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		e.fake.ClearFaults()
		e.fake.SetFault(op, region, f)
		_, err = client(static).GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{})
		if errorCode(err) != tc.code || !strings.Contains(err.Error(), "GetCallerIdentity") {
			t.Errorf("%s: %v, want %s", tc.spec, err, tc.code)
		}
	}
}

// An unknown fault action is a 400 that names the valid ones.
func TestControlRejectsUnknownFaultAction(t *testing.T) {
	srv := New().Start()
	defer srv.Close()
	code, out := control(t, http.MethodPost, srv.URL+"/_fake/fault?spec=DescribeImages=explode:1", nil)
	msg, _ := out["error"].(string)
	if code != http.StatusBadRequest || !strings.Contains(msg, `unknown kind "explode"`) {
		t.Fatalf("unknown action: %d %v", code, out)
	}
	for _, want := range FaultActions() {
		if !strings.Contains(msg, want) {
			t.Errorf("the error %q does not name %s", msg, want)
		}
	}
	for _, kind := range FaultActions() {
		name, _, _ := strings.Cut(kind, ":")
		if a, err := ParseFaultAction(name); err != nil || string(a) != name {
			t.Errorf("ParseFaultAction(%q) = %q, %v", name, a, err)
		}
	}
}

// The fake names every AWS action it answered, as IAM actions, in Go and in GET /_fake/state:
// an answered fault counts (the call needed the permission), an unknown action does not.
func TestActionsServed(t *testing.T) {
	e := newEC2Env(t, nil)
	if got := e.fake.ActionsServed(); len(got) != 0 {
		t.Fatalf("a fresh fake served %v", got)
	}
	ssmValue(t, e.url, "us-east-1")
	if _, err := e.client("us-west-2").DescribeVpcs(context.Background(), &ec2.DescribeVpcsInput{}); err != nil {
		t.Fatal(err)
	}
	e.fake.SetFault(OpRunInstances, "us-east-1", Fault{AccessDenied: true})
	if _, err := e.client("us-east-1").RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: aws.String("ami-0123"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}); err == nil {
		t.Fatal("RunInstances: want the AccessDenied fault")
	}
	stsc := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(e.url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAFAKE", "secret", "")})
	if _, err := stsc.GetCallerIdentity(context.Background(), &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := post(t, e.url, map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKIAFAKE/20261130/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=x"},
		"Action=LaunchRockets&Version=2016-11-15"); code != http.StatusBadRequest {
		t.Errorf("unknown action answered %d", code)
	}
	want := "ec2:DescribeVpcs ec2:RunInstances ssm:GetParameter sts:GetCallerIdentity"
	if got := strings.Join(e.fake.ActionsServed(), " "); got != want {
		t.Errorf("ActionsServed() = %s, want %s", got, want)
	}
	code, out := control(t, http.MethodGet, e.url+"/_fake/state?region=us-east-1", nil)
	served, _ := out["actions_served"].([]any)
	var names []string
	for _, a := range served {
		s, _ := a.(string)
		names = append(names, s)
	}
	if code != 200 || strings.Join(names, " ") != want {
		t.Errorf("GET /_fake/state: %d actions_served %v, want %s (every region's)", code, out["actions_served"], want)
	}
}
