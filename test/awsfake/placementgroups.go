package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/url"
)

// Placement groups (CreatePlacementGroup, DescribePlacementGroups, DeletePlacementGroup and
// RunInstances' Placement.GroupName). EFA instances for multi-node work belong in a cluster
// placement group (efa-launch.md). The error codes are EC2's (EC2 API Reference, "Error codes":
// InvalidPlacementGroup.Duplicate, .InUse, .Unknown); the InUse message is the one public
// Terraform runs quote ("The placement group 'mine' is in use and may not be deleted."), the
// others are the fake's own wording.

// PlacementGroup is one placement group.
type PlacementGroup struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Strategy       string            `json:"strategy"`
	State          string            `json:"state"`
	PartitionCount int               `json:"partition_count,omitempty"`
	SpreadLevel    string            `json:"spread_level,omitempty"`
	Tags           map[string]string `json:"tags,omitempty"`
}

// PlacementGroupInput is the decoded form of CreatePlacementGroup and DeletePlacementGroup.
type PlacementGroupInput struct {
	GroupName      string
	Strategy       string
	PartitionCount int
	SpreadLevel    string
	TagSpecs       []TagSpecification
}

// ParseCreatePlacementGroup decodes CreatePlacementGroup. The API marks GroupName and Strategy
// optional; the fake asks for both (a nameless group could not be found again or removed by
// name, and EC2 documents no default strategy).
func ParseCreatePlacementGroup(form url.Values) (PlacementGroupInput, error) {
	in := PlacementGroupInput{GroupName: form.Get("GroupName"), Strategy: form.Get("Strategy"), SpreadLevel: form.Get("SpreadLevel")}
	if in.GroupName == "" || len(in.GroupName) > 255 {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupName (up to 255 ASCII characters)")
	}
	switch in.Strategy {
	case "cluster", "spread", "partition":
	case "":
		return in, inputError("MissingParameter", "The request must contain the parameter Strategy (cluster, spread or partition)")
	default:
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter strategy is invalid. Valid values: cluster, spread, partition", in.Strategy)
	}
	var err error
	if in.PartitionCount, err = intParam(form, "PartitionCount", 0, 1, 7); err != nil {
		return in, err
	}
	if in.PartitionCount > 0 && in.Strategy != "partition" {
		return in, inputError("InvalidParameterCombination", "PartitionCount is valid only when Strategy is partition")
	}
	switch in.SpreadLevel {
	case "", "host", "rack":
	default:
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter spreadLevel is invalid. Valid values: host, rack", in.SpreadLevel)
	}
	in.TagSpecs, err = parseTagSpecifications(form, "placement-group")
	return in, err
}

// ParseDeletePlacementGroup decodes DeletePlacementGroup.
func ParseDeletePlacementGroup(form url.Values) (PlacementGroupInput, error) {
	in := PlacementGroupInput{GroupName: form.Get("GroupName")}
	if in.GroupName == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupName")
	}
	return in, nil
}

// DescribePlacementGroupsInput is the decoded form of DescribePlacementGroups.
type DescribePlacementGroupsInput struct {
	DescribeInput
	GroupNames []string
}

var placementGroupFilters = map[string]bool{"group-name": true, "group-arn": true, "state": true, "strategy": true, "spread-level": true, "tag-key": true}

// ParseDescribePlacementGroups decodes DescribePlacementGroups (GroupName.N, GroupId.N, Filter.N;
// the call has no paging).
func ParseDescribePlacementGroups(form url.Values) (DescribePlacementGroupsInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "GroupId", idPrefix: "pg", malformedCode: "InvalidParameterValue",
		filters: placementGroupFilters, tagFilters: true})
	return DescribePlacementGroupsInput{DescribeInput: d, GroupNames: indexedList(form, "GroupName")}, err
}

func placementGroupUnknown(name string) response {
	return badRequest("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", name)
}

// placementGroupByName runs under s.mu.
func placementGroupByName(rd *regionData, name string) *PlacementGroup {
	for _, g := range rd.placementGroups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

func (s *Server) placementGroupArn(region string, g *PlacementGroup) string {
	return fmt.Sprintf("arn:%s:ec2:%s:%s:placement-group/%s", partition(region), region, s.account, g.Name)
}

func (s *Server) createPlacementGroup(region string, in PlacementGroupInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if placementGroupByName(rd, in.GroupName) != nil {
		return badRequest("InvalidPlacementGroup.Duplicate", "The Placement Group '%s' already exists.", in.GroupName)
	}
	g := &PlacementGroup{ID: s.newID("pg"), Name: in.GroupName, Strategy: in.Strategy, State: "available",
		PartitionCount: in.PartitionCount, SpreadLevel: in.SpreadLevel}
	if g.Strategy == "spread" && g.SpreadLevel == "" {
		g.SpreadLevel = "rack"
	}
	applyTags(&g.Tags, tagsFor(in.TagSpecs, "placement-group"))
	rd.placementGroups[g.ID] = g
	return xmlOK(xmlCreatePlacementGroup{ec2Meta: meta(), Group: s.renderPlacementGroup(region, g)})
}

func (s *Server) describePlacementGroups(region string, in DescribePlacementGroupsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, name := range in.GroupNames {
		if placementGroupByName(rd, name) == nil {
			return placementGroupUnknown(name)
		}
	}
	var all []*PlacementGroup
	for _, id := range sortedKeys(rd.placementGroups) {
		all = append(all, rd.placementGroups[id])
	}
	groups, _, errResp, ok := describe(describeSpec[*PlacementGroup]{
		in: in.DescribeInput, all: all, id: func(g *PlacementGroup) string { return g.ID },
		notFound: func(missing []string) response { return placementGroupUnknown(missing[0]) },
		keep:     func(g *PlacementGroup) bool { return len(in.GroupNames) == 0 || contains(in.GroupNames, g.Name) },
		tags:     func(g *PlacementGroup) map[string]string { return g.Tags },
		field: func(g *PlacementGroup, name string) []string {
			switch name {
			case "group-name":
				return []string{g.Name}
			case "group-arn":
				return []string{s.placementGroupArn(region, g)}
			case "state":
				return []string{g.State}
			case "strategy":
				return []string{g.Strategy}
			case "spread-level":
				return []string{g.SpreadLevel}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribePlacementGroups{ec2Meta: meta(), Groups: []xmlPlacementGroup{}}
	for _, g := range groups {
		out.Groups = append(out.Groups, s.renderPlacementGroup(region, g))
	}
	return xmlOK(out)
}

func (s *Server) deletePlacementGroup(region string, in PlacementGroupInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	g := placementGroupByName(rd, in.GroupName)
	if g == nil {
		return placementGroupUnknown(in.GroupName)
	}
	// "You must terminate all instances in the placement group before you can delete the
	// placement group" (DeletePlacementGroup reference): a shutting-down one still counts.
	for _, r := range rd.instances {
		if r.PlacementGroup == g.Name && r.State != StateTerminated {
			return badRequest("InvalidPlacementGroup.InUse", "The placement group '%s' is in use and may not be deleted.", g.Name)
		}
	}
	delete(rd.placementGroups, g.ID)
	return returnTrue(OpDeletePlacementGroup)
}

type xmlPlacementGroup struct {
	GroupName      string    `xml:"groupName"`
	State          string    `xml:"state"`
	Strategy       string    `xml:"strategy"`
	PartitionCount int       `xml:"partitionCount,omitempty"`
	SpreadLevel    string    `xml:"spreadLevel,omitempty"`
	GroupID        string    `xml:"groupId"`
	GroupArn       string    `xml:"groupArn"`
	TagSet         *[]xmlTag `xml:"tagSet>item,omitempty"`
}

func (s *Server) renderPlacementGroup(region string, g *PlacementGroup) xmlPlacementGroup {
	return xmlPlacementGroup{GroupName: g.Name, State: g.State, Strategy: g.Strategy, PartitionCount: g.PartitionCount,
		SpreadLevel: g.SpreadLevel, GroupID: g.ID, GroupArn: s.placementGroupArn(region, g), TagSet: xmlTags(g.Tags)}
}

type xmlCreatePlacementGroup struct {
	XMLName xml.Name `xml:"CreatePlacementGroupResponse"`
	ec2Meta
	Group xmlPlacementGroup `xml:"placementGroup"`
}

type xmlDescribePlacementGroups struct {
	XMLName xml.Name `xml:"DescribePlacementGroupsResponse"`
	ec2Meta
	Groups []xmlPlacementGroup `xml:"placementGroupSet>item"`
}
