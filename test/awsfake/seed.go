package awsfake

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"time"
)

// SeedData is the JSON form of the fake's contents, used by the
// dlami-fake-aws binary's -seed flag.
type SeedData struct {
	Account string                `json:"account,omitempty"`
	Regions map[string]RegionSeed `json:"regions"`
}

// RegionSeed holds one region's images and parameters.
type RegionSeed struct {
	Images     []Image     `json:"images,omitempty"`
	Parameters []Parameter `json:"parameters,omitempty"`
}

// DecodeSeed reads SeedData as JSON and checks what the fake relies on.
func DecodeSeed(r io.Reader) (SeedData, error) {
	var d SeedData
	dec := json.NewDecoder(io.LimitReader(r, 64<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return SeedData{}, fmt.Errorf("seed: %w", err)
	}
	if len(d.Regions) == 0 {
		return SeedData{}, fmt.Errorf("seed: no regions; want {\"regions\": {\"us-east-1\": {\"images\": [...], \"parameters\": [...]}}}")
	}
	for region, rs := range d.Regions {
		if region == "" {
			return SeedData{}, fmt.Errorf("seed: empty region name")
		}
		for i, img := range rs.Images {
			if !strings.HasPrefix(img.ID, "ami-") {
				return SeedData{}, fmt.Errorf("seed: regions.%s.images[%d].id %q must start with ami-", region, i, img.ID)
			}
			if img.OwnerID == "" {
				return SeedData{}, fmt.Errorf("seed: regions.%s.images[%d].owner_id is empty", region, i)
			}
		}
		for i, p := range rs.Parameters {
			if !strings.HasPrefix(p.Name, "/") {
				return SeedData{}, fmt.Errorf("seed: regions.%s.parameters[%d].name %q must start with /", region, i, p.Name)
			}
		}
	}
	return d, nil
}

// Load adds everything in d to the fake.
func (s *Server) Load(d SeedData) {
	if d.Account != "" {
		s.SetAccount(d.Account)
	}
	for region, rs := range d.Regions {
		for _, img := range rs.Images {
			s.PutImage(region, img)
		}
		for _, p := range rs.Parameters {
			s.PutParameter(region, p)
		}
	}
}

// SeedRegions are the 16 regions DefaultSeed fills.
var SeedRegions = []string{
	"us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
	"eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1", "eu-north-1",
	"ap-northeast-1", "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ap-south-1",
}

// SeedBuilds are the Base OSS builds DefaultSeed publishes, oldest first; the
// last one is what .../latest/ami-id points at. The first one is past its
// deprecation time.
var SeedBuilds = []string{"20240614", "20260904", "20261002"}

type seedFamily struct {
	slug, title string // SSM ami_type prefix and AMI name title (without OS)
}

var seedFamilies = []seedFamily{
	{"base-oss-nvidia-driver-gpu", "Base OSS Nvidia Driver GPU AMI"},
	{"oss-nvidia-driver-gpu-pytorch-2.9", "OSS Nvidia Driver AMI GPU PyTorch 2.9"},
}

var seedOS = []struct{ slug, title, rootDevice string }{
	{"ubuntu-24.04", "Ubuntu 24.04", "/dev/sda1"},
	{"ubuntu-22.04", "Ubuntu 22.04", "/dev/sda1"},
	{"amazon-linux-2023", "Amazon Linux 2023", "/dev/xvda"},
}

// SeedAMIID derives the deterministic AMI id DefaultSeed gives an image, so
// tests can name expected ids without hard-coding them.
func SeedAMIID(region, name string) string {
	h := fnv.New64a()
	_, _ = io.WriteString(h, region+"|"+name)
	return fmt.Sprintf("ami-0%016x", h.Sum64())[:21]
}

// SeedName is the AMI name DefaultSeed uses, following AWS's pattern:
// "Deep Learning [ARM64 ]<title> (<os>) <build>".
func SeedName(arch, familyTitle, osTitle, build string) string {
	arm := ""
	if arch == "arm64" {
		arm = "ARM64 "
	}
	return fmt.Sprintf("Deep Learning %s%s (%s) %s", arm, familyTitle, osTitle, build)
}

// DefaultSeed returns DLAMI-like images and their SSM parameters for the
// given regions (SeedRegions when none are given): the Base OSS family for
// both architectures and three operating systems, SeedBuilds each, plus a
// PyTorch family so parameter listings are not trivially short.
func DefaultSeed(regions ...string) SeedData {
	if len(regions) == 0 {
		regions = SeedRegions
	}
	d := SeedData{Account: DefaultAccount, Regions: map[string]RegionSeed{}}
	for _, region := range regions {
		var rs RegionSeed
		for _, fam := range seedFamilies {
			for _, arch := range []string{"x86_64", "arm64"} {
				for _, osv := range seedOS {
					var latest Image
					for i, build := range SeedBuilds {
						created, _ := time.Parse("20060102", build)
						created = created.Add(9*time.Hour + 12*time.Minute + 34*time.Second)
						deprecate := created.AddDate(2, 0, 0)
						name := SeedName(arch, fam.title, osv.title, build)
						img := Image{
							ID:   SeedAMIID(region, name),
							Name: name,
							Description: fmt.Sprintf("Supported EC2 instances: G4dn, G5, G6, Gr6, G6e, P4d, P4de, P5, P5e, P5en, P6-B200. "+
								"Release notes: https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html (build %s)", build),
							OwnerID:         DLAMIOwner,
							OwnerAlias:      "amazon",
							State:           "available",
							Architecture:    arch,
							CreationDate:    created.UTC().Format("2006-01-02T15:04:05.000Z"),
							DeprecationTime: deprecate.UTC().Format("2006-01-02T15:04:05.000Z"),
							RootDeviceName:  osv.rootDevice,
							Public:          true,
						}
						rs.Images = append(rs.Images, img)
						if i == len(SeedBuilds)-1 {
							latest = img
						}
					}
					created, _ := time.Parse("2006-01-02T15:04:05.000Z", latest.CreationDate)
					rs.Parameters = append(rs.Parameters, Parameter{
						Name:         fmt.Sprintf("/aws/service/deeplearning/ami/%s/%s-%s/latest/ami-id", arch, fam.slug, osv.slug),
						Value:        latest.ID,
						DataType:     "text",
						Version:      int64(40 + len(SeedBuilds)),
						LastModified: created.Add(3 * time.Hour),
					})
				}
			}
		}
		d.Regions[region] = rs
	}
	return d
}

// NewSeeded returns a fake loaded with DefaultSeed(regions...).
func NewSeeded(regions ...string) *Server {
	s := New()
	s.Load(DefaultSeed(regions...))
	return s
}
