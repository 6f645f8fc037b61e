package dlami

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"

	"github.com/dlami-bake/packer-plugin-dlami/internal/dlamiresolve"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

// decodeHCL turns an HCL body into the cty value Packer hands Configure.
func decodeHCL(t *testing.T, d *Datasource, src string) cty.Value {
	t.Helper()
	f, diags := hclparse.NewParser().ParseHCL([]byte(src), "test.pkr.hcl")
	if diags.HasErrors() {
		t.Fatalf("parse: %v", diags)
	}
	v, diags := hcldec.Decode(f.Body, d.ConfigSpec(), &hcl.EvalContext{})
	if diags.HasErrors() {
		t.Fatalf("decode: %v", diags)
	}
	return v
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name    string
		hcl     string
		raw     map[string]interface{} // used instead of hcl when set
		wantErr []string
		// wantWarn are the deprecation warnings Configure must log; every
		// other case must log none.
		wantWarn []string
		check    func(t *testing.T, c *Config)
	}{
		{
			name: "empty block gets defaults",
			check: func(t *testing.T, c *Config) {
				if c.Architecture != "x86_64" || c.OS != "ubuntu-24.04" || c.Flavor != "base-oss-nvidia-driver-gpu" || c.Timeout != 30*time.Second || c.ExecuteTimeout != 5*time.Minute {
					t.Errorf("defaults: %+v", c)
				}
			},
		},
		{
			name: "full block",
			hcl: `
architecture = "arm64"
os = "amazon-linux-2023"
build = "20261002"
region = "us-west-2"
regions = ["eu-west-1", "ap-south-1"]
owners = ["amazon", "123456789012"]
allow_deprecated = true
max_retries = 5
timeout = "10s"
ssm_endpoint = "http://127.0.0.1:9999"
custom_endpoint_ec2 = "https://ec2.us-west-2.amazonaws.com"
sts_endpoint = "https://sts.us-west-2.amazonaws.com"
skip_credential_validation = true
profile = "bake"
mfa_code = "123456"
assume_role {
  role_arn = "arn:aws:iam::123456789012:role/bake"
  session_name = "packer"
  external_id = "x"
  duration_seconds = 3600
  policy = <<POLICY
{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "*"}]}
POLICY
  policy_arns = ["arn:aws:iam::aws:policy/ReadOnlyAccess"]
  tags = { team = "ml-infra", pipeline = "rebake" }
  transitive_tag_keys = ["team"]
}
golden {
  name_prefix = "ml-golden-"
  tags = { "dlami:family" = "base" }
}`,
			check: func(t *testing.T, c *Config) {
				if c.Architecture != "arm64" || c.Build != "20261002" || len(c.Regions) != 2 || c.Timeout != 10*time.Second || c.MaxRetries != 5 {
					t.Errorf("config %+v", c)
				}
				if !c.SkipCredentialValidation || c.MFACode != "123456" || c.CustomEndpointEC2 != "https://ec2.us-west-2.amazonaws.com" || c.STSEndpoint == "" {
					t.Errorf("access config %+v", c)
				}
				ar := c.AssumeRole
				if ar.RoleARN == "" || ar.DurationSeconds != 3600 || ar.SessionName != "packer" || ar.ExternalID != "x" ||
					!strings.Contains(ar.Policy, `"ssm:GetParameter"`) || len(ar.PolicyARNs) != 1 || ar.Tags["pipeline"] != "rebake" ||
					len(ar.TransitiveTagKeys) != 1 || ar.TransitiveTagKeys[0] != "team" {
					t.Errorf("assume_role %+v", ar)
				}
				// The default source_ami_tag is the resolver's (internal/amitags), not Prepare's.
				if c.Golden == nil || c.Golden.NamePrefix != "ml-golden-" || c.Golden.Tags["dlami:family"] != "base" || c.Golden.SourceAMITag != "" {
					t.Errorf("golden %+v", c.Golden)
				}
			},
		},
		{
			name: "parameter_name sets architecture from the path",
			hcl:  `parameter_name = "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id"`,
			check: func(t *testing.T, c *Config) {
				if c.Architecture != "arm64" || c.OS != "" || c.Flavor != "" {
					t.Errorf("config %+v", c)
				}
			},
		},
		{name: "bad architecture with hint", hcl: `architecture = "amd64"`, wantErr: []string{`architecture "amd64"`, `did you mean "x86_64"`}},
		{name: "aarch64 hint", hcl: `architecture = "aarch64"`, wantErr: []string{`did you mean "arm64"`}},
		{name: "bad os", hcl: `os = "ubuntu-20.04"`, wantErr: []string{`os "ubuntu-20.04": must be one of ubuntu-24.04, ubuntu-22.04, amazon-linux-2023`}},
		{name: "bad flavor", hcl: `flavor = "Base OSS"`, wantErr: []string{`flavor "Base OSS"`}},
		{name: "bad build", hcl: `build = "2026-10-02"`, wantErr: []string{`build "2026-10-02": must be the YYYYMMDD`}},
		{name: "impossible build date", hcl: `build = "20261302"`, wantErr: []string{`build "20261302"`}},
		{name: "parameter_name with os", hcl: "parameter_name = \"/x/y\"\nos = \"ubuntu-22.04\"", wantErr: []string{"parameter_name and os are both set"}},
		{name: "parameter_name with build", hcl: "parameter_name = \"/x/y\"\nbuild = \"20261002\"", wantErr: []string{"parameter_name and build are both set"}},
		{name: "relative parameter_name", hcl: `parameter_name = "aws/service/x"`, wantErr: []string{"parameter_name \"aws/service/x\": must be a full SSM parameter name"}},
		{
			name:    "architecture contradicts parameter_name",
			hcl:     "architecture = \"x86_64\"\nparameter_name = \"/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id\"",
			wantErr: []string{`architecture = "x86_64" but parameter_name is under arm64`},
		},
		{name: "bad region", hcl: `region = "us-east"`, wantErr: []string{`region "us-east": not an AWS region`}},
		{name: "bad regions entry", hcl: `regions = ["us-east-1", "EU"]`, wantErr: []string{`regions[1] "EU"`}},
		{name: "odd region allowed when validation skipped", hcl: "region = \"local\"\nskip_region_validation = true"},
		{name: "bad owner", hcl: `owners = ["amazn"]`, wantErr: []string{`owners[0] "amazn": must be a 12-digit account id or one of amazon, self, aws-marketplace`}},
		{name: "golden without selector", hcl: "golden {\n}", wantErr: []string{"golden: set name_prefix or tags"}},
		{name: "golden bad owner", hcl: "golden {\n name_prefix = \"x\"\n owners = [\"me\"]\n}", wantErr: []string{`golden.owners[0] "me"`}},
		{name: "access key without secret", hcl: `access_key = "AKIA"`, wantErr: []string{"access_key and secret_key must be set together"}},
		{name: "assume_role without arn", hcl: "assume_role {\n external_id = \"x\"\n}", wantErr: []string{"assume_role: role_arn is required"}},
		{name: "assume_role tags without arn", hcl: "assume_role {\n tags = { a = \"b\" }\n}", wantErr: []string{"assume_role: role_arn is required"}},
		{
			name:     "deprecated ec2_endpoint still works, with a warning",
			hcl:      `ec2_endpoint = "http://127.0.0.1:4566"`,
			wantWarn: []string{"ec2_endpoint is deprecated: rename it to custom_endpoint_ec2"},
			check: func(t *testing.T, c *Config) {
				if c.CustomEndpointEC2 != "http://127.0.0.1:4566" {
					t.Errorf("custom_endpoint_ec2 = %q", c.CustomEndpointEC2)
				}
			},
		},
		{
			name:     "ec2_endpoint and custom_endpoint_ec2 agreeing",
			hcl:      "ec2_endpoint = \"http://127.0.0.1:4566\"\ncustom_endpoint_ec2 = \"http://127.0.0.1:4566\"",
			wantWarn: []string{"ec2_endpoint is deprecated"},
		},
		{
			name:     "ec2_endpoint and custom_endpoint_ec2 disagreeing",
			hcl:      "ec2_endpoint = \"http://127.0.0.1:4566\"\ncustom_endpoint_ec2 = \"http://127.0.0.1:9999\"",
			wantErr:  []string{`ec2_endpoint = "http://127.0.0.1:4566" and custom_endpoint_ec2 = "http://127.0.0.1:9999" disagree`, "keep custom_endpoint_ec2 only"},
			wantWarn: []string{"ec2_endpoint is deprecated"},
		},
		{name: "bad custom_endpoint_ec2", hcl: `custom_endpoint_ec2 = "ec2.local"`, wantErr: []string{`custom_endpoint_ec2 "ec2.local": must be an http(s) URL`}},
		{name: "bad deprecated ec2_endpoint is named by its replacement", hcl: `ec2_endpoint = "ec2.local"`, wantErr: []string{`custom_endpoint_ec2 "ec2.local"`}, wantWarn: []string{"ec2_endpoint is deprecated"}},
		{
			name:     "deprecated assume_role.duration still works, with a warning",
			hcl:      "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n duration = \"1h\"\n}",
			wantWarn: []string{"assume_role.duration is deprecated: rename it to assume_role.duration_seconds"},
			check: func(t *testing.T, c *Config) {
				if c.AssumeRole.DurationSeconds != 3600 {
					t.Errorf("duration_seconds = %d", c.AssumeRole.DurationSeconds)
				}
			},
		},
		{
			name:     "duration and duration_seconds agreeing",
			hcl:      "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n duration = \"30m\"\n duration_seconds = 1800\n}",
			wantWarn: []string{"assume_role.duration is deprecated"},
		},
		{
			name:     "duration and duration_seconds disagreeing",
			hcl:      "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n duration = \"1h\"\n duration_seconds = 900\n}",
			wantErr:  []string{"assume_role.duration = 1h0m0s and assume_role.duration_seconds = 900 disagree", "keep duration_seconds only"},
			wantWarn: []string{"assume_role.duration is deprecated"},
		},
		{
			name:     "duration in fractions of a second",
			hcl:      "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n duration = \"1h0.5s\"\n}",
			wantErr:  []string{"assume_role.duration = 1h0m0.5s: STS takes whole seconds"},
			wantWarn: []string{"assume_role.duration is deprecated"},
		},
		{
			name:    "duration_seconds below STS's minimum",
			hcl:     "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n duration_seconds = 60\n}",
			wantErr: []string{"assume_role.duration_seconds = 60 seconds: STS accepts 900 to 43200"},
		},
		{
			name:     "deprecated duration out of range is named as written",
			hcl:      "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n duration = \"24h\"\n}",
			wantErr:  []string{"assume_role.duration = 86400 seconds: STS accepts 900 to 43200"},
			wantWarn: []string{"assume_role.duration is deprecated"},
		},
		{
			name:    "policy that is not JSON",
			hcl:     "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n policy = \"Allow everything\"\n}",
			wantErr: []string{"assume_role.policy: not valid JSON"},
		},
		{
			name:    "policy_arns entry that is not an ARN",
			hcl:     "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n policy_arns = [\"ReadOnlyAccess\"]\n}",
			wantErr: []string{`assume_role.policy_arns[0] "ReadOnlyAccess": must be a managed policy ARN`},
		},
		{
			name:    "transitive tag key without its tag",
			hcl:     "assume_role {\n role_arn = \"arn:aws:iam::123456789012:role/bake\"\n tags = { team = \"ml\" }\n transitive_tag_keys = [\"owner\"]\n}",
			wantErr: []string{`assume_role.transitive_tag_keys[0] "owner": not a key of assume_role.tags`},
		},
		{name: "mfa_code not six digits", hcl: `mfa_code = "12345"`, wantErr: []string{"mfa_code: must be the 6-digit code"}},
		{name: "assume_role bad arn", hcl: "assume_role {\n role_arn = \"bake\"\n}", wantErr: []string{`assume_role.role_arn "bake"`}},
		{name: "negative max_retries", hcl: `max_retries = -1`, wantErr: []string{"max_retries = -1"}},
		{name: "bad endpoint", hcl: `ssm_endpoint = "localhost:4566"`, wantErr: []string{`ssm_endpoint "localhost:4566": must be an http(s) URL`}},
		{name: "bad duration", hcl: `timeout = "soon"`, wantErr: []string{"timeout"}},
		{
			name:    "several errors are all reported",
			hcl:     "architecture = \"ppc64\"\nos = \"win\"\nregion = \"x\"",
			wantErr: []string{"architecture \"ppc64\"", "os \"win\"", "region \"x\""},
		},
		{
			name: "unknown values are not validated",
			raw: map[string]interface{}{
				"architecture": "<unknown>", "os": "74D93920-ED26-11E3-AC10-0800200C9A66", "region": "<unknown>",
				"build": "<unknown>", "ssm_endpoint": "<unknown>", "owners": []interface{}{"<unknown>"},
			},
		},
		{name: "unknown key rejected", raw: map[string]interface{}{"ami_name": "x"}, wantErr: []string{"ami_name"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var warnings []string
			d := &Datasource{logf: func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }}
			var err error
			if tc.raw != nil {
				err = d.Configure(tc.raw)
			} else {
				err = d.Configure(decodeHCL(t, d, tc.hcl))
			}
			if len(warnings) != len(tc.wantWarn) || len(d.deprecations) != len(tc.wantWarn) {
				t.Errorf("logged %q, kept %q; want %d warnings %q", warnings, d.deprecations, len(tc.wantWarn), tc.wantWarn)
			}
			for i, w := range tc.wantWarn {
				if i < len(warnings) && (!strings.HasPrefix(warnings[i], "[WARN] dlami: ") || !strings.Contains(warnings[i], w)) {
					t.Errorf("warning %q is not a [WARN] line containing %q", warnings[i], w)
				}
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Configure accepted it; want error with %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Configure: %v", err)
			}
			if tc.check != nil {
				tc.check(t, &d.config)
			}
		})
	}
}

func TestSpecs(t *testing.T) {
	d := &Datasource{}
	for _, k := range []string{"architecture", "os", "flavor", "parameter_name", "build", "region", "regions", "owners", "allow_deprecated",
		"golden", "access_key", "secret_key", "token", "profile", "shared_credentials_file", "assume_role", "max_retries",
		"skip_metadata_api_check", "ssm_endpoint", "ec2_endpoint", "sts_endpoint", "timeout",
		"custom_endpoint_ec2", "mfa_code", "skip_credential_validation", "execute_timeout", "skip_region_validation"} {
		if _, ok := d.ConfigSpec()[k]; !ok {
			t.Errorf("ConfigSpec lacks %q", k)
		}
	}
	for _, k := range []string{"ami_id", "name", "description", "build", "creation_date", "deprecation_time", "owner_id", "architecture",
		"root_device_name", "parameter_name", "parameter_version", "parameter_last_modified", "region", "amis", "warnings",
		"golden_ami_id", "golden_source_ami", "rebake_needed", "rebake_regions", "golden_amis"} {
		if _, ok := d.OutputSpec()[k]; !ok {
			t.Errorf("OutputSpec lacks %q", k)
		}
	}
}

func startFake(t *testing.T, regions ...string) (*awsfake.Server, string) {
	t.Helper()
	awstest.IsolateEnv(t)
	f := awsfake.NewSeeded(regions...)
	srv := f.Start()
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func configureHCL(t *testing.T, src string) *Datasource {
	t.Helper()
	d := &Datasource{}
	if err := d.Configure(decodeHCL(t, d, src)); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return d
}

// endpointHCL points every client at the fake, with the amazon plugin's
// names; credentials are validated (the default) against its STS.
func endpointHCL(url string) string {
	return fmt.Sprintf("ssm_endpoint = %q\ncustom_endpoint_ec2 = %q\nsts_endpoint = %q\naccess_key = \"AKIAFAKE\"\nsecret_key = \"fake\"\n", url, url, url)
}

func TestExecute(t *testing.T) {
	regions := []string{"us-east-1", "eu-west-1", "ap-northeast-1"}
	f, url := startFake(t, regions...)
	id := func(region, build string) string {
		return awsfake.SeedAMIID(region, awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", build))
	}
	// A golden AMI in us-east-1 baked from the current DLAMI; eu-west-1 has
	// one from an older build; ap-northeast-1 has none.
	f.PutImage("us-east-1", awsfake.Image{ID: "ami-0golden0000000001", Name: "ml-golden-1", OwnerID: awsfake.DefaultAccount, Architecture: "x86_64",
		CreationDate: "2026-10-03T00:00:00.000Z", Tags: map[string]string{"dlami:source_ami": id("us-east-1", "20261002"), "dlami:verified": "true"}})
	f.PutImage("eu-west-1", awsfake.Image{ID: "ami-0golden0000000002", Name: "ml-golden-1", OwnerID: awsfake.DefaultAccount, Architecture: "x86_64",
		CreationDate: "2026-09-05T00:00:00.000Z", Tags: map[string]string{"dlami:source_ami": id("eu-west-1", "20260904"), "dlami:verified": "true"}})

	d := configureHCL(t, endpointHCL(url)+`
region = "us-east-1"
regions = ["eu-west-1", "ap-northeast-1"]
golden {
  name_prefix = "ml-golden-"
}`)
	v, err := d.Execute()
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if calls := f.Calls(); len(calls) == 0 || calls[0].Op != awsfake.OpGetCallerIdentity || f.CallCount(awsfake.OpGetCallerIdentity, "") != 1 {
		t.Errorf("want one sts:GetCallerIdentity before any lookup, calls = %+v", calls)
	}
	get := func(k string) cty.Value { return v.GetAttr(k) }
	if got := get("ami_id").AsString(); got != id("us-east-1", "20261002") {
		t.Errorf("ami_id = %s", got)
	}
	for k, want := range map[string]string{
		"name": "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002", "build": "20261002",
		"owner_id": "898082745236", "architecture": "x86_64", "root_device_name": "/dev/sda1", "region": "us-east-1",
		"creation_date": "2026-10-02T09:12:34.000Z", "deprecation_time": "2028-10-02T09:12:34.000Z",
		"parameter_name":          "/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id",
		"parameter_last_modified": "2026-10-02T12:12:34Z", "golden_ami_id": "ami-0golden0000000001",
		"golden_source_ami": id("us-east-1", "20261002"),
	} {
		if got := get(k).AsString(); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if bf := get("parameter_version").AsBigFloat(); !bf.IsInt() {
		t.Errorf("parameter_version = %v", bf)
	}
	amis := get("amis").AsValueMap()
	if len(amis) != 3 || amis["eu-west-1"].AsString() != id("eu-west-1", "20261002") || amis["ap-northeast-1"].AsString() != id("ap-northeast-1", "20261002") {
		t.Errorf("amis = %#v", amis)
	}
	if !get("rebake_needed").True() {
		t.Errorf("rebake_needed = false with a stale golden in eu-west-1 and none in ap-northeast-1")
	}
	var rr []string
	for _, r := range get("rebake_regions").AsValueSlice() {
		rr = append(rr, r.AsString())
	}
	if strings.Join(rr, ",") != "ap-northeast-1,eu-west-1" {
		t.Errorf("rebake_regions = %v", rr)
	}
}

func TestExecuteRebakeNotNeeded(t *testing.T) {
	f, url := startFake(t, "us-east-1")
	latest, _ := f.GetParameterValue("us-east-1", dlamiresolve.ParameterPath("x86_64", dlamiresolve.DefaultFlavor, "ubuntu-24.04"))
	f.PutImage("us-east-1", awsfake.Image{ID: "ami-0golden0000000001", Name: "base-golden", OwnerID: awsfake.DefaultAccount, Architecture: "x86_64",
		CreationDate: "2026-10-03T00:00:00.000Z", Tags: map[string]string{"built-from": latest, "dlami:family": "base", "dlami:verified": "true"}})
	d := configureHCL(t, endpointHCL(url)+`
region = "us-east-1"
golden {
  tags = { "dlami:family" = "base" }
  source_ami_tag = "built-from"
}`)
	v, err := d.Execute()
	if err != nil {
		t.Fatalf("Execute: %v", err)
	}
	if v.GetAttr("rebake_needed").True() || v.GetAttr("golden_source_ami").AsString() != latest || len(v.GetAttr("rebake_regions").AsValueSlice()) != 0 {
		t.Errorf("rebake_needed = %v golden_source_ami = %v", v.GetAttr("rebake_needed"), v.GetAttr("golden_source_ami"))
	}
}

// A golden AMI baked from the current DLAMI whose first boot was never verified (or failed)
// does not make the fleet current: the rebake is still due, unless include_unverified is set.
func TestExecuteGoldenMustBeVerified(t *testing.T) {
	for _, tc := range []struct {
		name, verified, setting string
		wantRebake              bool
	}{
		{"never verified", "", "", true},
		{"verification failed", "false", "", true},
		{"verified", "true", "", false},
		{"include_unverified", "", "include_unverified = true", false},
		{"include_unverified and failed", "false", "include_unverified = true", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, url := startFake(t, "us-east-1")
			latest, _ := f.GetParameterValue("us-east-1", dlamiresolve.ParameterPath("x86_64", dlamiresolve.DefaultFlavor, "ubuntu-24.04"))
			tags := map[string]string{"dlami:source_ami": latest, "dlami:family": "base"}
			if tc.verified != "" {
				tags["dlami:verified"] = tc.verified
			}
			f.PutImage("us-east-1", awsfake.Image{ID: "ami-0golden0000000001", Name: "base-golden", OwnerID: awsfake.DefaultAccount,
				Architecture: "x86_64", CreationDate: "2026-10-03T00:00:00.000Z", Tags: tags})
			d := configureHCL(t, endpointHCL(url)+"region = \"us-east-1\"\ngolden {\n  tags = { \"dlami:family\" = \"base\" }\n  "+tc.setting+"\n}\n")
			v, err := d.Execute()
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			wantGolden := "ami-0golden0000000001"
			if tc.wantRebake {
				wantGolden = ""
			}
			if v.GetAttr("rebake_needed").True() != tc.wantRebake || v.GetAttr("golden_ami_id").AsString() != wantGolden {
				t.Errorf("rebake_needed = %v, golden_ami_id = %q; want %v, %q", v.GetAttr("rebake_needed").True(), v.GetAttr("golden_ami_id").AsString(), tc.wantRebake, wantGolden)
			}
		})
	}
}

func TestExecuteWarningsAndFailures(t *testing.T) {
	t.Run("deprecated allowed shows a warning output", func(t *testing.T) {
		_, url := startFake(t, "us-east-1")
		d := configureHCL(t, endpointHCL(url)+"region = \"us-east-1\"\nbuild = \"20240614\"\nallow_deprecated = true\n")
		v, err := d.Execute()
		if err != nil {
			t.Fatalf("Execute: %v", err)
		}
		w := v.GetAttr("warnings").AsValueSlice()
		if len(w) != 1 || !strings.Contains(w[0].AsString(), "deprecated") || v.GetAttr("parameter_name").AsString() != "" {
			t.Errorf("warnings = %v", w)
		}
	})
	t.Run("failure returns a null value and names each failed region", func(t *testing.T) {
		f, url := startFake(t, "us-east-1", "eu-west-1")
		f.SetFault(awsfake.OpGetParameter, "eu-west-1", awsfake.Fault{AccessDenied: true})
		d := configureHCL(t, endpointHCL(url)+"regions = [\"us-east-1\", \"eu-west-1\"]\n")
		v, err := d.Execute()
		if err == nil || !v.IsNull() {
			t.Fatalf("Execute = %v, %v; want null and an error", v, err)
		}
		for _, w := range []string{"dlami: 1 of 2 regions failed (eu-west-1)", `"ssm:GetParameter"`, "arn:aws:ssm:eu-west-1::parameter/aws/service/deeplearning/ami/x86_64/"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	})
	t.Run("no region anywhere", func(t *testing.T) {
		_, url := startFake(t)
		d := configureHCL(t, endpointHCL(url))
		if _, err := d.Execute(); err == nil || !strings.Contains(err.Error(), "no region: set region") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("AWS_REGION is used when region is unset", func(t *testing.T) {
		_, url := startFake(t, "eu-west-1")
		t.Setenv("AWS_REGION", "eu-west-1")
		d := configureHCL(t, endpointHCL(url))
		v, err := d.Execute()
		if err != nil || v.GetAttr("region").AsString() != "eu-west-1" {
			t.Fatalf("Execute: %v %v", v, err)
		}
	})
	t.Run("per-call timeout", func(t *testing.T) {
		f, url := startFake(t, "us-east-1")
		f.SetFault(awsfake.OpDescribeImages, "", awsfake.Fault{Latency: 3 * time.Second})
		d := configureHCL(t, endpointHCL(url)+"region = \"us-east-1\"\ntimeout = \"300ms\"\n")
		_, err := d.Execute()
		if err == nil || !strings.Contains(err.Error(), "did not answer within 300ms") {
			t.Fatalf("err = %v", err)
		}
	})
}

// The amazon plugin's access settings, as pasted from an amazon-ebs block.
func TestExecuteAccessSettings(t *testing.T) {
	const region = "us-east-1"
	latest := awsfake.SeedAMIID(region, awsfake.SeedName("x86_64", "Base OSS Nvidia Driver GPU AMI", "Ubuntu 24.04", "20261002"))
	tests := []struct {
		name  string
		hcl   func(url string) string
		fault func(f *awsfake.Server)
		// wantErr, when set, are substrings of the error; otherwise Execute
		// must resolve the AMI.
		wantErr []string
		check   func(t *testing.T, f *awsfake.Server, v cty.Value)
	}{
		{
			name: "credentials are validated once, before the lookup",
			hcl:  func(url string) string { return endpointHCL(url) + "regions = [\"us-east-1\", \"eu-west-1\"]\n" },
			check: func(t *testing.T, f *awsfake.Server, _ cty.Value) {
				if n := f.CallCount(awsfake.OpGetCallerIdentity, ""); n != 1 {
					t.Errorf("GetCallerIdentity calls = %d, want 1 for 2 regions", n)
				}
			},
		},
		{
			name: "skip_credential_validation = true skips sts:GetCallerIdentity",
			hcl:  func(url string) string { return endpointHCL(url) + "skip_credential_validation = true\n" },
			check: func(t *testing.T, f *awsfake.Server, _ cty.Value) {
				if n := f.CallCount(awsfake.OpGetCallerIdentity, ""); n != 0 {
					t.Errorf("GetCallerIdentity calls = %d, want 0", n)
				}
			},
		},
		{
			name: "failed validation names the setting and stops before the lookup",
			hcl:  endpointHCL,
			fault: func(f *awsfake.Server) {
				f.SetFault(awsfake.OpGetCallerIdentity, "", awsfake.Fault{AccessDenied: true})
			},
			wantErr: []string{"dlami: us-east-1: validating AWS credentials (skip_credential_validation = false) with sts:GetCallerIdentity failed", "set skip_credential_validation = true only for AWS-compatible endpoints without STS"},
			check: func(t *testing.T, f *awsfake.Server, _ cty.Value) {
				if n := f.CallCount(awsfake.OpGetParameter, "") + f.CallCount(awsfake.OpDescribeImages, ""); n != 0 {
					t.Errorf("%d lookup calls after failed validation", n)
				}
			},
		},
		{
			name: "deprecated ec2_endpoint works and says so in the warnings output",
			hcl: func(url string) string {
				return fmt.Sprintf("ssm_endpoint = %q\nec2_endpoint = %q\nsts_endpoint = %q\naccess_key = \"AKIAFAKE\"\nsecret_key = \"fake\"\n", url, url, url)
			},
			check: func(t *testing.T, _ *awsfake.Server, v cty.Value) {
				w := v.GetAttr("warnings").AsValueSlice()
				if len(w) != 1 || !strings.Contains(w[0].AsString(), "ec2_endpoint is deprecated: rename it to custom_endpoint_ec2") {
					t.Errorf("warnings = %v", w)
				}
			},
		},
		{
			name: "assume_role with the amazon plugin's arguments",
			hcl: func(url string) string {
				return endpointHCL(url) + `
assume_role {
  role_arn            = "arn:aws:iam::123456789012:role/packer-dlami-read"
  session_name        = "rebake"
  external_id         = "ext-7"
  duration_seconds    = 3600
  policy_arns         = ["arn:aws:iam::aws:policy/ReadOnlyAccess"]
  tags                = { team = "ml-infra" }
  transitive_tag_keys = ["team"]
}
`
			},
			check: func(t *testing.T, f *awsfake.Server, _ cty.Value) {
				calls := f.AssumeRoleCalls()
				if len(calls) != 1 || calls[0].RoleARN != "arn:aws:iam::123456789012:role/packer-dlami-read" || calls[0].SessionName != "rebake" || calls[0].ExternalID != "ext-7" {
					t.Errorf("AssumeRole calls = %+v", calls)
				}
				for _, c := range f.Calls() {
					if c.Op != awsfake.OpAssumeRole && c.AccessKeyID != awsfake.AssumedAccessKeyID {
						t.Errorf("%s signed with %s, want the assumed role's key", c.Op, c.AccessKeyID)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, url := startFake(t, region, "eu-west-1")
			if tc.fault != nil {
				tc.fault(f)
			}
			d := configureHCL(t, tc.hcl(url)+"region = \"us-east-1\"\n")
			v, err := d.Execute()
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Execute succeeded, want an error with %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
			} else {
				if err != nil {
					t.Fatalf("Execute: %v", err)
				}
				if got := v.GetAttr("ami_id").AsString(); got != latest {
					t.Errorf("ami_id = %s, want %s", got, latest)
				}
			}
			if tc.check != nil {
				tc.check(t, f, v)
			}
		})
	}
}

// TestExecuteInstanceType: instance_type is read with DescribeInstanceTypes and an image the
// type cannot run is refused before anything launches, naming the settings to change; a
// denied DescribeInstanceTypes only warns.
func TestExecuteInstanceType(t *testing.T) {
	cases := []struct {
		name    string
		hcl     string
		deny    bool
		wantErr []string
		warn    string
	}{
		{name: "x86_64 DLAMI on p5.48xlarge", hcl: `instance_type = "p5.48xlarge"`},
		{name: "arm64 DLAMI on g5g.xlarge", hcl: "architecture = \"arm64\"\ninstance_type = \"g5g.xlarge\""},
		{name: "arm64 DLAMI on p5.48xlarge", hcl: "architecture = \"arm64\"\ninstance_type = \"p5.48xlarge\"",
			wantErr: []string{"is arm64 but p5.48xlarge runs only x86_64", "change architecture or instance_type"}},
		{name: "fractional g6f.large", hcl: `instance_type = "g6f.large"`,
			wantErr: []string{`instance_type = "g6f.large"`, "fraction of one GPU"}},
		{name: "denied", hcl: "architecture = \"arm64\"\ninstance_type = \"p5.48xlarge\"", deny: true,
			warn: "not checked against the image: ec2:DescribeInstanceTypes denied"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, url := startFake(t, "us-east-1")
			if c.deny {
				f.SetFault(awsfake.OpDescribeInstanceTypes, "", awsfake.Fault{AccessDenied: true})
			}
			d := configureHCL(t, endpointHCL(url)+"region = \"us-east-1\"\n"+c.hcl)
			d.logf = func(string, ...any) {}
			v, err := d.Execute()
			if n := f.CallCount(awsfake.OpDescribeInstanceTypes, ""); n != 1 {
				t.Errorf("DescribeInstanceTypes called %d times, want once", n)
			}
			if len(c.wantErr) > 0 {
				if err == nil {
					t.Fatal("Execute passed")
				}
				for _, s := range c.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Execute: %v", err)
			}
			var warnings []string
			for _, w := range v.GetAttr("warnings").AsValueSlice() {
				warnings = append(warnings, w.AsString())
			}
			if got := strings.Join(warnings, "\n"); c.warn == "" && got != "" || !strings.Contains(got, c.warn) {
				t.Errorf("warnings = %q, want %q", got, c.warn)
			}
		})
	}
}
