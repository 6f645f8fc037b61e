package awsfake

import (
	"encoding/xml"
	"net/url"
)

// FakeRegions are the regions DescribeRegions lists (the fake answers for
// any region; these are the ones it admits exist).
func FakeRegions() []string {
	return append(append([]string(nil), SeedRegions...), "ap-northeast-3")
}

// DescribeRegionsInput is the decoded form of DescribeRegions.
type DescribeRegionsInput struct {
	RegionNames []string
	Filters     []Filter
	AllRegions  bool
}

var regionFilters = map[string]bool{"region-name": true, "endpoint": true, "opt-in-status": true}

// ParseDescribeRegions decodes DescribeRegions.
func ParseDescribeRegions(form url.Values) (DescribeRegionsInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "RegionName", filters: regionFilters})
	in := DescribeRegionsInput{RegionNames: d.IDs, Filters: d.Filters}
	if err != nil {
		return in, err
	}
	in.AllRegions, err = boolParam(form, "AllRegions")
	return in, err
}

func describeRegions(in DescribeRegionsInput) response {
	regions, _, errResp, ok := describe(describeSpec[string]{
		in: DescribeInput{IDs: in.RegionNames, Filters: in.Filters}, all: FakeRegions(), id: func(r string) string { return r },
		notFound: notFoundFirst("InvalidParameterValue", "Invalid region: %s"),
		field: func(r, name string) []string {
			switch name {
			case "region-name":
				return []string{r}
			case "endpoint":
				return []string{regionEndpoint(r)}
			case "opt-in-status":
				return []string{"opt-in-not-required"}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeRegions{ec2Meta: meta(), Regions: []xmlRegion{}}
	for _, r := range regions {
		out.Regions = append(out.Regions, xmlRegion{RegionName: r, RegionEndpoint: regionEndpoint(r), OptInStatus: "opt-in-not-required"})
	}
	return xmlOK(out)
}

func regionEndpoint(region string) string { return "ec2." + region + ".amazonaws.com" }

type xmlRegion struct {
	RegionName     string `xml:"regionName"`
	RegionEndpoint string `xml:"regionEndpoint"`
	OptInStatus    string `xml:"optInStatus"`
}

type xmlDescribeRegions struct {
	XMLName xml.Name `xml:"DescribeRegionsResponse"`
	ec2Meta
	Regions []xmlRegion `xml:"regionInfo>item"`
}

// offeredTypes are listed when DescribeInstanceTypeOfferings names no type;
// when it names types, the fake offers every well-formed one.
func offeredTypes() []string {
	return []string{"g6e.xlarge", "p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "t3.micro"}
}

// DescribeOfferingsInput is the decoded form of DescribeInstanceTypeOfferings.
type DescribeOfferingsInput struct {
	LocationType string
	Filters      []Filter
}

var offeringFilters = map[string]bool{"location": true, "instance-type": true}

// ParseDescribeInstanceTypeOfferings decodes DescribeInstanceTypeOfferings.
func ParseDescribeInstanceTypeOfferings(form url.Values) (DescribeOfferingsInput, error) {
	in := DescribeOfferingsInput{LocationType: orDefault(form.Get("LocationType"), "region")}
	switch in.LocationType {
	case "region", "availability-zone", "availability-zone-id":
	default:
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter locationType is invalid. Valid values: region, availability-zone, availability-zone-id", in.LocationType)
	}
	// MaxResults is checked but not used: the few offerings fit one answer.
	d, err := parseDescribe(form, describeParams{filters: offeringFilters, maxResultsLo: 5})
	in.Filters = d.Filters
	return in, err
}

func describeOfferings(region string, in DescribeOfferingsInput) response {
	locations := []string{region}
	switch in.LocationType {
	case "availability-zone":
		locations = []string{region + "a"}
	case "availability-zone-id":
		locations = []string{"use1-az1"}
	}
	types := offeredTypes()
	for _, f := range in.Filters {
		if f.Name == "instance-type" {
			types = nil
			for _, v := range f.Values {
				if instanceTypeShape.MatchString(v) {
					types = append(types, v)
				}
			}
		}
	}
	var all []xmlOffering
	for _, loc := range locations {
		for _, t := range types {
			all = append(all, xmlOffering{InstanceType: t, LocationType: in.LocationType, Location: loc})
		}
	}
	offerings, _, errResp, ok := describe(describeSpec[xmlOffering]{
		in: DescribeInput{Filters: in.Filters}, all: all,
		field: func(o xmlOffering, name string) []string {
			if name == "location" {
				return []string{o.Location}
			}
			return []string{o.InstanceType}
		},
	})
	if !ok {
		return errResp
	}
	return xmlOK(xmlDescribeOfferings{ec2Meta: meta(), Offerings: append([]xmlOffering{}, offerings...)})
}

type xmlOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

type xmlDescribeOfferings struct {
	XMLName xml.Name `xml:"DescribeInstanceTypeOfferingsResponse"`
	ec2Meta
	Offerings []xmlOffering `xml:"instanceTypeOfferingSet>item"`
}
