package dlamiresolve

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlami-bake/packer-plugin-dlami/internal/awsaccess"
	"github.com/dlami-bake/packer-plugin-dlami/test/awsfake"
	"github.com/dlami-bake/packer-plugin-dlami/test/awstest"
)

var fixedNow = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

const (
	baseTitle    = "Base OSS Nvidia Driver GPU AMI"
	pytorchTitle = "OSS Nvidia Driver AMI GPU PyTorch 2.9"
	latestBuild  = "20261002"
)

type env struct {
	fake *awsfake.Server
	url  string
	opts awsaccess.Options
}

func newEnv(t testing.TB, regions ...string) *env {
	t.Helper()
	fake, url := awstest.Fake(t, fixedNow, regions...)
	return &env{fake: fake, url: url, opts: awsaccess.Options{
		AccessKey: "AKIAFAKESTATIC000001", SecretKey: "fake-secret", Region: "us-east-1",
		SSMEndpoint: url, EC2Endpoint: url, STSEndpoint: url,
		Retry: awsaccess.RetryPolicy{MaxBackoff: 2 * time.Millisecond}, SkipMetadataAPICheck: true,
	}}
}

func (e *env) resolver(t testing.TB) *Resolver {
	t.Helper()
	cfg, err := awsaccess.LoadConfig(context.Background(), e.opts)
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	return &Resolver{Clients: NewClientFactory(&awsaccess.Session{Config: cfg, Options: e.opts}), Now: func() time.Time { return fixedNow }, Logf: t.Logf, CallTimeout: 5 * time.Second, Retry: e.opts.Retry}
}

func seedID(region, arch, title, osTitle, build string) string {
	return awsfake.SeedAMIID(region, awsfake.SeedName(arch, title, osTitle, build))
}

func paramOf(arch, os string) string { return ParameterPath(arch, DefaultFlavor, os) }

func TestResolve(t *testing.T) {
	const r = "us-east-1"
	latest := seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", latestBuild)
	tests := []struct {
		name    string
		setup   func(f *awsfake.Server)
		opts    func(o *awsaccess.Options)
		q       Query
		wantID  string
		wantErr []string // substrings, all required
		check   func(t *testing.T, res *Result, f *awsfake.Server)
	}{
		{
			name: "defaults resolve latest base oss ubuntu 24.04 x86_64", wantID: latest,
			check: func(t *testing.T, res *Result, f *awsfake.Server) {
				want := Image{ID: latest, Name: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002", Build: latestBuild,
					CreationDate: "2026-10-02T09:12:34.000Z", DeprecationTime: "2028-10-02T09:12:34.000Z", OwnerID: DLAMIOwnerAccount,
					OwnerAlias: "amazon", Architecture: "x86_64", State: "available", RootDeviceName: "/dev/sda1", RootDeviceType: "ebs", VirtualizationType: "hvm"}
				if res.Image.Description == "" {
					t.Errorf("description empty")
				}
				res.Image.Description = ""
				if res.Image != want {
					t.Errorf("image:\n got %+v\nwant %+v", res.Image, want)
				}
				if res.ParameterName != paramOf("x86_64", "ubuntu-24.04") || res.ParameterVersion != 43 || res.ParameterLastModified != "2026-10-02T12:12:34Z" {
					t.Errorf("parameter = %q v%d %q", res.ParameterName, res.ParameterVersion, res.ParameterLastModified)
				}
				if len(res.Warnings) != 0 || res.Golden != nil {
					t.Errorf("warnings %v golden %v", res.Warnings, res.Golden)
				}
			},
		},
		{
			name: "arm64 amazon linux 2023", q: Query{Architecture: "arm64", OS: "amazon-linux-2023"},
			wantID: seedID(r, "arm64", baseTitle, "Amazon Linux 2023", latestBuild),
			check: func(t *testing.T, res *Result, _ *awsfake.Server) {
				if res.Image.RootDeviceName != "/dev/xvda" || !strings.Contains(res.Image.Name, "ARM64") || res.Image.Architecture != "arm64" {
					t.Errorf("image %+v", res.Image)
				}
			},
		},
		{
			name: "build pin resolves by name without SSM", q: Query{Build: "20260904"},
			wantID: seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", "20260904"),
			check: func(t *testing.T, res *Result, f *awsfake.Server) {
				if res.ParameterName != "" || f.CallCount(awsfake.OpGetParameter, "") != 0 {
					t.Errorf("build pin used SSM: param %q calls %d", res.ParameterName, f.CallCount(awsfake.OpGetParameter, ""))
				}
				if res.Image.Build != "20260904" {
					t.Errorf("build %q", res.Image.Build)
				}
			},
		},
		{
			name: "build pin arm64 ubuntu 22.04", q: Query{Build: "20260904", Architecture: "arm64", OS: "ubuntu-22.04"},
			wantID: seedID(r, "arm64", baseTitle, "Ubuntu 22.04", "20260904"),
		},
		{
			name: "unknown build lists available builds", q: Query{Build: "20261003"},
			wantErr: []string{"us-east-1", "no base-oss-nvidia-driver-gpu-ubuntu-24.04 image of build 20261003", "builds available (newest first): 20261002, 20260904, 20240614"},
		},
		{
			name: "build pin ignores a newer lookalike from another Amazon account",
			setup: func(f *awsfake.Server) {
				f.PutImage(r, awsfake.Image{ID: "ami-0lookalike000001", Name: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20260904",
					OwnerID: "137112412989", OwnerAlias: "amazon", Public: true, Architecture: "x86_64", CreationDate: "2026-12-01T00:00:00.000Z"})
			},
			q: Query{Build: "20260904"}, wantID: seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", "20260904"),
		},
		{
			name: "build pin with only a lookalike is rejected",
			setup: func(f *awsfake.Server) {
				f.PutImage(r, awsfake.Image{ID: "ami-0lookalike000001", Name: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261111",
					OwnerID: "137112412989", OwnerAlias: "amazon", Public: true, Architecture: "x86_64", CreationDate: "2026-11-11T00:00:00.000Z"})
			},
			q: Query{Build: "20261111"}, wantErr: []string{"owned by 137112412989 (alias amazon)", "not a trusted owner"},
		},
		{
			name: "deprecated pinned build fails", q: Query{Build: "20240614"},
			wantErr: []string{"deprecated at 2026-06-14T09:12:34.000Z", "allow_deprecated = true"},
		},
		{
			name: "deprecated pinned build allowed warns", q: Query{Build: "20240614", AllowDeprecated: true},
			wantID: seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", "20240614"),
			check: func(t *testing.T, res *Result, _ *awsfake.Server) {
				if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "deprecated") {
					t.Errorf("warnings = %v", res.Warnings)
				}
			},
		},
		{
			name:   "parameter_name override to another DLAMI family",
			q:      Query{ParameterName: "/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.9-ubuntu-22.04/latest/ami-id"},
			wantID: seedID(r, "x86_64", pytorchTitle, "Ubuntu 22.04", latestBuild),
		},
		{
			name: "parameter_name override outside the DLAMI tree skips the name check",
			setup: func(f *awsfake.Server) {
				f.PutParameter(r, awsfake.Parameter{Name: "/team/base-ami", Value: latest, Version: 7})
			},
			q: Query{ParameterName: "/team/base-ami"}, wantID: latest,
			check: func(t *testing.T, res *Result, _ *awsfake.Server) {
				if res.ParameterVersion != 7 || res.ParameterName != "/team/base-ami" {
					t.Errorf("param %q v%d", res.ParameterName, res.ParameterVersion)
				}
			},
		},
		{
			name:    "missing parameter names the nearest",
			q:       Query{Flavor: "base-oss-nvidia-driver"},
			wantErr: []string{"us-east-1: SSM parameter /aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-ubuntu-24.04/latest/ami-id not found", `nearest DLAMI under /aws/service/deeplearning/ami/x86_64: "base-oss-nvidia-driver-gpu-ubuntu-24.04"`, "oss-nvidia-driver-gpu-pytorch-2.9-amazon-linux-2023"},
		},
		{
			name:    "missing parameter after deletion",
			setup:   func(f *awsfake.Server) { f.DeleteParameter(r, paramOf("x86_64", "ubuntu-22.04")) },
			q:       Query{OS: "ubuntu-22.04"},
			wantErr: []string{"not found", `nearest DLAMI under /aws/service/deeplearning/ami/x86_64: "base-oss-nvidia-driver-gpu-ubuntu-24.04"`},
		},
		{
			name: "missing parameter and listing denied",
			setup: func(f *awsfake.Server) {
				f.DeleteParameter(r, paramOf("x86_64", "ubuntu-24.04"))
				f.SetFault(awsfake.OpGetParametersByPath, "", awsfake.Fault{AccessDenied: true})
			},
			wantErr: []string{"not found", "listing /aws/service/deeplearning/ami/x86_64 for alternatives failed too", "ssm:GetParametersByPath"},
		},
		{
			name:    "deregistered image (gone)",
			setup:   func(f *awsfake.Server) { f.DeleteImage(r, latest) },
			wantErr: []string{"points at " + latest, "EC2 does not know", "deregistered"},
		},
		{
			name:    "deregistered image (state)",
			setup:   func(f *awsfake.Server) { f.UpdateImage(r, latest, func(i *awsfake.Image) { i.State = "deregistered" }) },
			wantErr: []string{`state "deregistered"`, "not available"},
		},
		{
			name:    "deprecated latest fails",
			setup:   func(f *awsfake.Server) { deprecate(f, r, latest) },
			wantErr: []string{"deprecated at 2026-11-01T00:00:00.000Z"},
		},
		{
			name: "deprecated latest allowed warns", setup: func(f *awsfake.Server) { deprecate(f, r, latest) },
			q: Query{AllowDeprecated: true}, wantID: latest,
			check: func(t *testing.T, res *Result, _ *awsfake.Server) {
				if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "allow_deprecated") {
					t.Errorf("warnings = %v", res.Warnings)
				}
			},
		},
		{
			name: "foreign owner rejected",
			setup: func(f *awsfake.Server) {
				f.UpdateImage(r, latest, func(i *awsfake.Image) { i.OwnerID, i.OwnerAlias = "111122223333", "" })
			},
			wantErr: []string{"owned by 111122223333", "not a trusted owner", "898082745236"},
		},
		{
			name: "amazon alias from another Amazon account rejected",
			setup: func(f *awsfake.Server) {
				f.UpdateImage(r, latest, func(i *awsfake.Image) { i.OwnerID = "137112412989" })
			},
			wantErr: []string{"owned by 137112412989 (alias amazon)", "not a trusted owner"},
		},
		{
			name: "foreign owner accepted when listed",
			setup: func(f *awsfake.Server) {
				f.UpdateImage(r, latest, func(i *awsfake.Image) { i.OwnerID, i.OwnerAlias = "111122223333", "" })
			},
			q: Query{Owners: []string{"amazon", "111122223333"}}, wantID: latest,
		},
		{
			name: "self-owned copy trusted through owners = self",
			setup: func(f *awsfake.Server) {
				f.PutImage(r, awsfake.Image{ID: "ami-0selfcopy00000001", Name: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002",
					OwnerID: awsfake.DefaultAccount, Architecture: "x86_64", CreationDate: "2026-10-03T00:00:00.000Z"})
				f.PutParameter(r, awsfake.Parameter{Name: "/team/dlami-copy", Value: "ami-0selfcopy00000001"})
			},
			q: Query{ParameterName: "/team/dlami-copy", Owners: []string{"self"}}, wantID: "ami-0selfcopy00000001",
		},
		{
			name: "self-owned copy rejected under default owners",
			setup: func(f *awsfake.Server) {
				f.PutImage(r, awsfake.Image{ID: "ami-0selfcopy00000001", Name: "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 24.04) 20261002",
					OwnerID: awsfake.DefaultAccount, Architecture: "x86_64"})
				f.PutParameter(r, awsfake.Parameter{Name: "/team/dlami-copy", Value: "ami-0selfcopy00000001"})
			},
			q: Query{ParameterName: "/team/dlami-copy"}, wantErr: []string{"owned by 123456789012", "not a trusted owner"},
		},
		{
			name: "parameter pointing at another family is rejected",
			setup: func(f *awsfake.Server) {
				f.PutParameter(r, awsfake.Parameter{Name: paramOf("x86_64", "ubuntu-24.04"), Value: seedID(r, "x86_64", pytorchTitle, "Ubuntu 24.04", latestBuild)})
			},
			wantErr: []string{"not the \"base-oss-nvidia-driver-gpu-ubuntu-24.04\" family"},
		},
		{
			name: "parameter pointing at an arm64 image for x86_64 is rejected",
			setup: func(f *awsfake.Server) {
				f.PutParameter(r, awsfake.Parameter{Name: paramOf("x86_64", "ubuntu-24.04"), Value: seedID(r, "arm64", baseTitle, "Ubuntu 24.04", latestBuild)})
			},
			wantErr: []string{"is arm64, but architecture = \"x86_64\""},
		},
		{
			name: "parameter value that is not an AMI id",
			setup: func(f *awsfake.Server) {
				f.PutParameter(r, awsfake.Parameter{Name: paramOf("x86_64", "ubuntu-24.04"), Value: "resolve:ssm:/elsewhere"})
			},
			wantErr: []string{"not an AMI id"},
		},
		{
			name:   "SSM throttled twice then answers",
			setup:  func(f *awsfake.Server) { f.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{Throttle: 2}) },
			wantID: latest,
			check: func(t *testing.T, _ *Result, f *awsfake.Server) {
				if n := f.CallCount(awsfake.OpGetParameter, r); n != 3 {
					t.Errorf("GetParameter calls = %d, want 3 (2 throttled + 1)", n)
				}
			},
		},
		{
			name:   "EC2 RequestLimitExceeded twice then answers",
			setup:  func(f *awsfake.Server) { f.SetFault(awsfake.OpDescribeImages, "", awsfake.Fault{Throttle: 2}) },
			wantID: latest,
			check: func(t *testing.T, _ *Result, f *awsfake.Server) {
				if n := f.CallCount(awsfake.OpDescribeImages, r); n != 3 {
					t.Errorf("DescribeImages calls = %d, want 3", n)
				}
			},
		},
		{
			name:   "one 500 is retried",
			setup:  func(f *awsfake.Server) { f.SetFault(awsfake.OpAny, "", awsfake.Fault{ServerError: 1}) },
			wantID: latest,
		},
		{
			name:    "persistent 500 gives up naming region and attempts",
			setup:   func(f *awsfake.Server) { f.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{ServerError: 100}) },
			opts:    func(o *awsaccess.Options) { o.Retry.MaxRetries = 2 },
			wantErr: []string{"us-east-1: ssm:GetParameter failed on all 3 attempts", "InternalServerError"},
			check: func(t *testing.T, _ *Result, f *awsfake.Server) {
				if n := f.CallCount(awsfake.OpGetParameter, r); n != 3 {
					t.Errorf("GetParameter calls = %d, want 3", n)
				}
			},
		},
		{
			name:  "persistent EC2 throttling fails at the call deadline, not after max_retries",
			setup: func(f *awsfake.Server) { f.SetFault(awsfake.OpDescribeImages, "", awsfake.Fault{Throttle: 1_000_000}) },
			opts:  func(o *awsaccess.Options) { o.Retry.MaxRetries = 1 },
			wantErr: []string{"us-east-1: ec2:DescribeImages was still throttled by AWS (RequestLimitExceeded", "at the per-call timeout of 200ms",
				"EC2 request rate limit in us-east-1", "raise timeout", "spread the CI matrix"},
			check: func(t *testing.T, _ *Result, f *awsfake.Server) {
				if n := f.CallCount(awsfake.OpDescribeImages, r); n <= 2 {
					t.Errorf("DescribeImages calls = %d: throttles were held to max_retries", n)
				}
			},
		},
		{
			name:    "SSM access denied names action and ARN",
			setup:   func(f *awsfake.Server) { f.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{AccessDenied: true}) },
			wantErr: []string{`allow action "ssm:GetParameter" on resource "arn:aws:ssm:us-east-1::parameter/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id"`},
			check: func(t *testing.T, _ *Result, f *awsfake.Server) {
				if n := f.CallCount(awsfake.OpGetParameter, r); n != 1 {
					t.Errorf("access denied was retried: %d calls", n)
				}
			},
		},
		{
			name:    "EC2 access denied names action",
			setup:   func(f *awsfake.Server) { f.SetFault(awsfake.OpDescribeImages, "", awsfake.Fault{AccessDenied: true}) },
			wantErr: []string{`allow action "ec2:DescribeImages" on resource "*"`, "UnauthorizedOperation"},
		},
		{
			name:    "malformed SSM body",
			setup:   func(f *awsfake.Server) { f.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{Malformed: true}) },
			wantErr: []string{"us-east-1: ssm:GetParameter returned a response that could not be parsed"},
		},
		{
			name:    "malformed EC2 body",
			setup:   func(f *awsfake.Server) { f.SetFault(awsfake.OpDescribeImages, "", awsfake.Fault{Malformed: true}) },
			wantErr: []string{"us-east-1: ec2:DescribeImages returned a response that could not be parsed"},
		},
		{
			name: "latency beyond the call deadline",
			setup: func(f *awsfake.Server) {
				f.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{Latency: 2 * time.Second})
			},
			q:       Query{},
			wantErr: []string{"us-east-1: ssm:GetParameter did not answer within 200ms"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, r)
			if tc.opts != nil {
				tc.opts(&e.opts)
			}
			if tc.setup != nil {
				tc.setup(e.fake)
			}
			res := e.resolver(t)
			if strings.Contains(tc.name, "deadline") {
				res.CallTimeout = 200 * time.Millisecond
			}
			got, err := res.Resolve(context.Background(), r, tc.q)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Resolve succeeded with %s, want error containing %q", got.Image.ID, tc.wantErr)
				}
				t.Logf("error: %v", err)
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q\n does not contain %q", err, w)
					}
				}
			} else {
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if got.Image.ID != tc.wantID || got.Region != r {
					t.Errorf("got %s in %s, want %s", got.Image.ID, got.Region, tc.wantID)
				}
			}
			if tc.check != nil {
				tc.check(t, got, e.fake)
			}
		})
	}
}

func deprecate(f *awsfake.Server, region, id string) {
	f.UpdateImage(region, id, func(i *awsfake.Image) { i.DeprecationTime = "2026-11-01T00:00:00.000Z" })
}

func TestResolveErrorTypes(t *testing.T) {
	const r = "eu-west-1"
	e := newEnv(t, r)
	e.fake.SetFault(awsfake.OpGetParameter, "", awsfake.Fault{AccessDenied: true})
	_, err := e.resolver(t).Resolve(context.Background(), r, Query{})
	var ad *awsaccess.AccessDeniedError
	if !errors.As(err, &ad) || ad.Action != "ssm:GetParameter" || ad.Region != r ||
		ad.Resource != "arn:aws:ssm:eu-west-1::parameter/aws/service/deeplearning/ami/x86_64/base-oss-nvidia-driver-gpu-ubuntu-24.04/latest/ami-id" {
		t.Fatalf("want AccessDeniedError, got %#v (%v)", ad, err)
	}

	e.fake.ClearFaults()
	_, err = e.resolver(t).Resolve(context.Background(), r, Query{OS: "amazon-linux-2023", Flavor: "base-oss-nvidia-drivr-gpu"})
	var nf *ParameterNotFoundError
	if !errors.As(err, &nf) || nf.Nearest != "base-oss-nvidia-driver-gpu-amazon-linux-2023" || len(nf.Available) != 6 {
		t.Fatalf("want ParameterNotFoundError with nearest, got %#v (%v)", nf, err)
	}
}

// verifiedAs sets img's dlami:verified tag to v ("" removes it).
func verifiedAs(img awsfake.Image, v string) awsfake.Image {
	if v == "" {
		delete(img.Tags, "dlami:verified")
	} else {
		img.Tags["dlami:verified"] = v
	}
	return img
}

func TestResolveGolden(t *testing.T) {
	const r = "us-west-2"
	latest := seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", latestBuild)
	older := seedID(r, "x86_64", baseTitle, "Ubuntu 24.04", "20260904")
	golden := func(id, name, created, source string) awsfake.Image {
		tags := map[string]string{"team": "ml-infra", "dlami:verified": "true"}
		if source != "" {
			tags["dlami:source_ami"] = source
		}
		return awsfake.Image{ID: id, Name: name, OwnerID: awsfake.DefaultAccount, Architecture: "x86_64", CreationDate: created, Tags: tags}
	}
	tests := []struct {
		name      string
		images    []awsfake.Image
		gq        GoldenQuery
		wantFound bool
		wantID    string
		wantSrc   string
		wantBake  bool
	}{
		{name: "no golden yet", gq: GoldenQuery{NamePrefix: "ml-golden-"}, wantBake: true},
		{
			name:   "golden baked from current base",
			images: []awsfake.Image{golden("ami-0golden000000001", "ml-golden-20261003", "2026-10-03T10:00:00.000Z", latest)},
			gq:     GoldenQuery{NamePrefix: "ml-golden-"}, wantFound: true, wantID: "ami-0golden000000001", wantSrc: latest,
		},
		{
			name: "newest golden is from an older base",
			images: []awsfake.Image{
				golden("ami-0golden000000001", "ml-golden-20260905", "2026-09-05T10:00:00.000Z", older),
				golden("ami-0golden000000002", "ml-golden-20260906", "2026-09-06T10:00:00.000Z", older),
				golden("ami-0golden000000000", "ml-golden-20260801", "2026-08-01T10:00:00.000Z", "ami-0ancient"),
			},
			gq: GoldenQuery{NamePrefix: "ml-golden-"}, wantFound: true, wantID: "ami-0golden000000002", wantSrc: older, wantBake: true,
		},
		{
			name:   "tag filter and custom source tag",
			images: []awsfake.Image{golden("ami-0golden000000003", "anything", "2026-10-05T00:00:00.000Z", "")},
			gq:     GoldenQuery{Tags: map[string]string{"team": "ml-*"}, SourceAMITag: "team"}, wantFound: true,
			wantID: "ami-0golden000000003", wantSrc: "ml-infra", wantBake: true,
		},
		{
			name:   "golden without source tag needs rebake",
			images: []awsfake.Image{golden("ami-0golden000000004", "ml-golden-x", "2026-10-05T00:00:00.000Z", "")},
			gq:     GoldenQuery{NamePrefix: "ml-golden-"}, wantFound: true, wantID: "ami-0golden000000004", wantBake: true,
		},
		{
			// The newest AMIs baked from the current base were never verified, or failed their
			// first boot: the fleet still runs the older verified one, so a rebake is due.
			name: "unverified or failed goldens do not count",
			images: []awsfake.Image{
				golden("ami-0golden000000006", "ml-golden-20260906", "2026-09-06T10:00:00.000Z", older),
				verifiedAs(golden("ami-0golden000000007", "ml-golden-20261003", "2026-10-03T10:00:00.000Z", latest), ""),
				verifiedAs(golden("ami-0golden000000008", "ml-golden-20261004", "2026-10-04T10:00:00.000Z", latest), "false"),
			},
			gq: GoldenQuery{NamePrefix: "ml-golden-"}, wantFound: true, wantID: "ami-0golden000000006", wantSrc: older, wantBake: true,
		},
		{
			name: "include_unverified counts them",
			images: []awsfake.Image{
				golden("ami-0golden000000006", "ml-golden-20260906", "2026-09-06T10:00:00.000Z", older),
				verifiedAs(golden("ami-0golden000000007", "ml-golden-20261003", "2026-10-03T10:00:00.000Z", latest), ""),
			},
			gq: GoldenQuery{NamePrefix: "ml-golden-", IncludeUnverified: true}, wantFound: true, wantID: "ami-0golden000000007", wantSrc: latest,
		},
		{
			name:   "only unverified goldens: none found",
			images: []awsfake.Image{verifiedAs(golden("ami-0golden000000009", "ml-golden-20261003", "2026-10-03T10:00:00.000Z", latest), "false")},
			gq:     GoldenQuery{NamePrefix: "ml-golden-"}, wantBake: true,
		},
		{
			name: "other accounts' images are not golden",
			images: []awsfake.Image{func() awsfake.Image {
				g := golden("ami-0golden000000005", "ml-golden-public", "2026-10-05T00:00:00.000Z", latest)
				g.OwnerID, g.Public = "444455556666", true
				return g
			}()},
			gq: GoldenQuery{NamePrefix: "ml-golden-"}, wantBake: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, r)
			for _, img := range tc.images {
				e.fake.PutImage(r, img)
			}
			gq := tc.gq
			res, err := e.resolver(t).Resolve(context.Background(), r, Query{Golden: &gq})
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			g := res.Golden
			if g == nil || g.Found != tc.wantFound || g.AMIID != tc.wantID || g.SourceAMI != tc.wantSrc || g.RebakeNeeded != tc.wantBake {
				t.Errorf("golden = %+v, want found=%v id=%s src=%s rebake=%v", g, tc.wantFound, tc.wantID, tc.wantSrc, tc.wantBake)
			}
		})
	}
}

func TestResolveAllReportsEachFailedRegion(t *testing.T) {
	regions := []string{"us-east-1", "eu-west-1", "ap-south-1", "us-west-2"}
	e := newEnv(t, regions...)
	e.fake.SetFault(awsfake.OpGetParameter, "eu-west-1", awsfake.Fault{AccessDenied: true})
	e.fake.DeleteParameter("us-west-2", paramOf("x86_64", "ubuntu-24.04"))
	res, err := e.resolver(t).ResolveAll(context.Background(), append(regions, "us-east-1"), Query{})
	var re *RegionsError
	if !errors.As(err, &re) {
		t.Fatalf("want *RegionsError, got %v", err)
	}
	if len(re.Failed) != 2 || re.Failed[0].Region != "eu-west-1" || re.Failed[1].Region != "us-west-2" || re.Total != 4 {
		t.Fatalf("failed = %+v", re.Failed)
	}
	for _, w := range []string{"2 of 4 regions failed (eu-west-1, us-west-2)", "eu-west-1: access denied for ssm:GetParameter", "us-west-2: SSM parameter"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	var ad *awsaccess.AccessDeniedError
	if !errors.As(err, &ad) || ad.Region != "eu-west-1" {
		t.Errorf("errors.As AccessDeniedError through RegionsError: %v", ad)
	}
	if len(res) != 2 || res["us-east-1"] == nil || res["ap-south-1"] == nil {
		t.Errorf("successful regions = %v", res)
	}
	if res["ap-south-1"].Image.ID != seedID("ap-south-1", "x86_64", baseTitle, "Ubuntu 24.04", latestBuild) {
		t.Errorf("ap-south-1 resolved %s", res["ap-south-1"].Image.ID)
	}
}

func TestResolveAllNoRegion(t *testing.T) {
	r := &Resolver{Clients: func(string) (Clients, error) { t.Fatal("no client should be made"); return Clients{}, nil }}
	if _, err := r.ResolveAll(context.Background(), nil, Query{}); err == nil || !strings.Contains(err.Error(), "set region or regions") {
		t.Fatalf("err = %v", err)
	}
}

func TestAssumeRoleUsesSTSEndpointAndAssumedCredentials(t *testing.T) {
	const r = "us-east-1"
	e := newEnv(t, r)
	e.opts.AssumeRole = &awsaccess.AssumeRole{RoleARN: "arn:aws:iam::123456789012:role/packer-bake", SessionName: "packer-ci", ExternalID: "ext-42"}
	if _, err := e.resolver(t).ResolveAll(context.Background(), []string{r, r}, Query{}); err != nil {
		t.Fatalf("ResolveAll: %v", err)
	}
	calls := e.fake.AssumeRoleCalls()
	if len(calls) != 1 || calls[0].ExternalID != "ext-42" || calls[0].SessionName != "packer-ci" || calls[0].RoleARN != e.opts.AssumeRole.RoleARN {
		t.Fatalf("AssumeRole calls = %+v", calls)
	}
	for _, c := range e.fake.Calls() {
		if c.Op != awsfake.OpAssumeRole && c.AccessKeyID != awsfake.AssumedAccessKeyID {
			t.Errorf("%s signed with %s, want the assumed key", c.Op, c.AccessKeyID)
		}
	}
}

func TestEndpointEnvAndOverride(t *testing.T) {
	const r = "us-east-1"
	t.Run("AWS_ENDPOINT_URL_SSM and _EC2 are honoured", func(t *testing.T) {
		e := newEnv(t, r)
		t.Setenv("AWS_ENDPOINT_URL_SSM", e.url)
		t.Setenv("AWS_ENDPOINT_URL_EC2", e.url)
		e.opts.SSMEndpoint, e.opts.EC2Endpoint = "", ""
		if _, err := e.resolver(t).Resolve(context.Background(), r, Query{}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
		if e.fake.CallCount(awsfake.OpGetParameter, r) != 1 || e.fake.CallCount(awsfake.OpDescribeImages, r) != 1 {
			t.Errorf("calls = %+v", e.fake.Calls())
		}
	})
	t.Run("explicit endpoints win over the environment", func(t *testing.T) {
		e := newEnv(t, r)
		t.Setenv("AWS_ENDPOINT_URL_SSM", "http://127.0.0.1:1")
		t.Setenv("AWS_ENDPOINT_URL_EC2", "http://127.0.0.1:1")
		t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
		if _, err := e.resolver(t).Resolve(context.Background(), r, Query{}); err != nil {
			t.Fatalf("Resolve: %v", err)
		}
	})
}

func TestCredentialErrors(t *testing.T) {
	const r = "us-east-1"
	t.Run("no credentials", func(t *testing.T) {
		e := newEnv(t, r)
		e.opts.AccessKey, e.opts.SecretKey = "", ""
		_, err := e.resolver(t).Resolve(context.Background(), r, Query{})
		if err == nil || !strings.Contains(err.Error(), "us-east-1: no usable AWS credentials for ssm:GetParameter: set access_key and secret_key") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("assume role denied names sts:AssumeRole, not the SSM call", func(t *testing.T) {
		e := newEnv(t, r)
		role := "arn:aws:iam::123456789012:role/packer-bake"
		e.opts.AssumeRole = &awsaccess.AssumeRole{RoleARN: role}
		e.fake.SetFault(awsfake.OpAssumeRole, "", awsfake.Fault{AccessDenied: true})
		res := e.resolver(t)
		res.AssumeRoleARN = role
		_, err := res.Resolve(context.Background(), r, Query{})
		var ad *awsaccess.AccessDeniedError
		if !errors.As(err, &ad) || ad.Action != "sts:AssumeRole" || ad.Resource != role {
			t.Fatalf("want AccessDeniedError for sts:AssumeRole on %s, got %v", role, err)
		}
		if e.fake.CallCount(awsfake.OpGetParameter, "") != 0 {
			t.Errorf("SSM was called without credentials")
		}
	})
}
