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
	in := DescribeRegionsInput{RegionNames: indexedList(form, "RegionName")}
	var err error
	if in.AllRegions, err = boolParam(form, "AllRegions"); err != nil {
		return in, err
	}
	in.Filters, err = parseFilters(form, regionFilters, false)
	return in, err
}

func describeRegions(in DescribeRegionsInput) response {
	all := FakeRegions()
	for _, name := range in.RegionNames {
		if !contains(all, name) {
			return badRequest("InvalidParameterValue", "Invalid region: %s", name)
		}
	}
	out := xmlDescribeRegions{ec2Meta: meta(), Regions: []xmlRegion{}}
	for _, r := range all {
		if len(in.RegionNames) > 0 && !contains(in.RegionNames, r) {
			continue
		}
		endpoint := "ec2." + r + ".amazonaws.com"
		if !matchFilters(in.Filters, nil, func(name string) []string {
			switch name {
			case "region-name":
				return []string{r}
			case "endpoint":
				return []string{endpoint}
			case "opt-in-status":
				return []string{"opt-in-not-required"}
			}
			return nil
		}) {
			continue
		}
		out.Regions = append(out.Regions, xmlRegion{RegionName: r, RegionEndpoint: endpoint, OptInStatus: "opt-in-not-required"})
	}
	return xmlOK(out)
}

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
	var err error
	if in.Filters, err = parseFilters(form, offeringFilters, false); err != nil {
		return in, err
	}
	_, err = intParam(form, "MaxResults", 0, 5, 1000)
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
	out := xmlDescribeOfferings{ec2Meta: meta(), Offerings: []xmlOffering{}}
	for _, loc := range locations {
		for _, t := range types {
			if matchFilters(in.Filters, nil, func(name string) []string {
				if name == "location" {
					return []string{loc}
				}
				return []string{t}
			}) {
				out.Offerings = append(out.Offerings, xmlOffering{InstanceType: t, LocationType: in.LocationType, Location: loc})
			}
		}
	}
	return xmlOK(out)
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
