package awsfake

import (
	"encoding/xml"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strings"
)

// Tag is one EC2 tag.
type Tag struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// TagSpecification is one TagSpecification.N group: tags for the resources
// of one type that a call creates.
type TagSpecification struct {
	ResourceType string
	Tags         []Tag
}

// parseTags reads prefix.N.Key / prefix.N.Value.
func parseTags(form url.Values, prefix string) ([]Tag, error) {
	idx := listIndices(form, prefix)
	if len(idx) > maxTagsPer {
		return nil, inputError("TagLimitExceeded", "The maximum number of tags per resource is %d; got %d", maxTagsPer, len(idx))
	}
	var out []Tag
	for _, i := range idx {
		t := Tag{Key: form.Get(fmt.Sprintf("%s.%d.Key", prefix, i)), Value: form.Get(fmt.Sprintf("%s.%d.Value", prefix, i))}
		if t.Key == "" || len(t.Key) > maxTagKey {
			return nil, inputError("InvalidParameterValue", "Tag key must be 1 to %d characters (%s.%d.Key)", maxTagKey, prefix, i)
		}
		if strings.HasPrefix(strings.ToLower(t.Key), "aws:") {
			return nil, inputError("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use (%s.%d.Key %q)", prefix, i, t.Key)
		}
		if len(t.Value) > maxTagValue {
			return nil, inputError("InvalidParameterValue", "Tag value must be at most %d characters (%s.%d.Value)", maxTagValue, prefix, i)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseTagSpecifications reads TagSpecification.N.ResourceType/Tag.M.*,
// accepting only the resource types in allowed.
func parseTagSpecifications(form url.Values, allowed ...string) ([]TagSpecification, error) {
	var out []TagSpecification
	for _, i := range listIndices(form, "TagSpecification") {
		rt := form.Get(fmt.Sprintf("TagSpecification.%d.ResourceType", i))
		if !contains(allowed, rt) {
			return nil, inputError("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation (want one of %s)", rt, strings.Join(allowed, ", "))
		}
		tags, err := parseTags(form, fmt.Sprintf("TagSpecification.%d.Tag", i))
		if err != nil {
			return nil, err
		}
		out = append(out, TagSpecification{ResourceType: rt, Tags: tags})
	}
	return out, nil
}

// copyTags returns a copy of m (nil stays nil).
func copyTags(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// applyTags merges tags into *m, creating the map when needed.
func applyTags(m *map[string]string, tags []Tag) {
	if len(tags) == 0 {
		return
	}
	if *m == nil {
		*m = map[string]string{}
	}
	for _, t := range tags {
		(*m)[t.Key] = t.Value
	}
}

// tagsFor collects the tags of the specs for one resource type.
func tagsFor(specs []TagSpecification, resourceType string) []Tag {
	var out []Tag
	for _, s := range specs {
		if s.ResourceType == resourceType {
			out = append(out, s.Tags...)
		}
	}
	return out
}

// resourceTypeOf maps an id to the EC2 resource type CreateTags accepts.
func resourceTypeOf(id string) (string, bool) {
	prefix, _, ok := strings.Cut(id, "-")
	if !ok || !idShape.MatchString(id) {
		return "", false
	}
	switch prefix {
	case "i":
		return "instance", true
	case "ami":
		return "image", true
	case "snap":
		return "snapshot", true
	case "vol":
		return "volume", true
	case "sg":
		return "security-group", true
	case "key":
		return "key-pair", true
	case "vpc":
		return "vpc", true
	case "subnet":
		return "subnet", true
	case "eni":
		return "network-interface", true
	case "eipalloc":
		return "elastic-ip", true
	case "pg":
		return "placement-group", true
	}
	return "", false
}

// TagsInput is the decoded form of CreateTags.
type TagsInput struct {
	ResourceIDs []string
	Tags        []Tag
}

// ParseCreateTags decodes CreateTags.
func ParseCreateTags(form url.Values) (TagsInput, error) {
	in := TagsInput{ResourceIDs: indexedList(form, "ResourceId")}
	if len(in.ResourceIDs) == 0 {
		return in, inputError("MissingParameter", "The request must contain the parameter ResourceId")
	}
	for _, id := range in.ResourceIDs {
		if _, ok := resourceTypeOf(id); !ok {
			return in, inputError("InvalidID", "The ID '%s' is not valid", id)
		}
	}
	var err error
	in.Tags, err = parseTags(form, "Tag")
	return in, err
}

var tagFilters = map[string]bool{"resource-id": true, "resource-type": true, "key": true, "value": true}

// ParseDescribeTags decodes DescribeTags.
func ParseDescribeTags(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, describeParams{filters: tagFilters, maxResultsLo: 5})
}

// tagsOf returns a pointer to the tag map of an owned resource, or the
// error EC2 gives for an id it cannot find. Runs under s.mu.
func (s *Server) tagsOf(rd *regionData, id string) (*map[string]string, response, bool) {
	rt, _ := resourceTypeOf(id)
	switch rt {
	case "instance":
		if r := rd.instances[id]; r != nil {
			return &r.Tags, response{}, true
		}
		return nil, notFoundInstances([]string{id}), false
	case "image":
		img := rd.images[id]
		if img == nil || !s.visibleTo(img) {
			return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id), false
		}
		if img.OwnerID != s.account {
			// The shared images map has one tag set per image; letting a
			// consumer tag the publisher's image would leak across accounts.
			return nil, ec2Error(http.StatusForbidden, "UnauthorizedOperation", fmt.Sprintf("You are not authorized to tag image %s (owned by %s); the fake tags only the caller's own images", id, img.OwnerID)), false
		}
		return &img.Tags, response{}, true
	case "snapshot":
		if sn := rd.snapshots[id]; sn != nil {
			return &sn.Tags, response{}, true
		}
		return nil, badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id), false
	case "volume":
		if v := rd.volumes[id]; v != nil {
			return &v.Tags, response{}, true
		}
		return nil, badRequest("InvalidVolume.NotFound", "The volume '%s' does not exist.", id), false
	case "security-group":
		if g := rd.groups[id]; g != nil {
			return &g.Tags, response{}, true
		}
		return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id), false
	case "key-pair":
		if kp := s.keyPairByID(rd, id); kp != nil {
			return &kp.Tags, response{}, true
		}
		return nil, badRequest("InvalidKeyPair.NotFound", "The key pair ID '%s' does not exist", id), false
	case "network-interface":
		if e := rd.interfaces[id]; e != nil {
			return &e.Tags, response{}, true
		}
		return nil, notFoundInterface(id), false
	case "elastic-ip":
		if a := rd.addresses[id]; a != nil {
			return &a.Tags, response{}, true
		}
		return nil, allocationNotFound(id), false
	case "placement-group":
		if g := rd.placementGroups[id]; g != nil {
			return &g.Tags, response{}, true
		}
		return nil, placementGroupUnknown(id), false
	}
	return nil, badRequest("InvalidID", "The ID '%s' is not valid or cannot be tagged by the fake", id), false
}

func (s *Server) createTags(region string, in TagsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var tagSets []*map[string]string
	for _, id := range in.ResourceIDs {
		m, errResp, ok := s.tagsOf(rd, id)
		if !ok {
			return errResp
		}
		tagSets = append(tagSets, m)
	}
	// EC2 refuses the whole call, setting nothing, when a resource would carry more tags than
	// its limit.
	for _, m := range tagSets {
		after := maps.Clone(*m)
		applyTags(&after, in.Tags)
		if len(after) > maxTagsPer {
			return badRequest("TagLimitExceeded", "The maximum number of tags per resource is %d", maxTagsPer)
		}
	}
	for _, m := range tagSets {
		applyTags(m, in.Tags)
	}
	return returnTrue(OpCreateTags)
}

func (s *Server) describeTags(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var all []xmlTagDescription
	add := func(id, rt string, tags map[string]string) {
		for _, k := range sortedKeys(tags) {
			all = append(all, xmlTagDescription{ResourceID: id, ResourceType: rt, Key: k, Value: tags[k]})
		}
	}
	for _, id := range sortedKeys(rd.instances) {
		add(id, "instance", rd.instances[id].Tags)
	}
	for _, id := range sortedKeys(rd.images) {
		if rd.images[id].OwnerID == s.account {
			add(id, "image", rd.images[id].Tags)
		}
	}
	for _, id := range sortedKeys(rd.snapshots) {
		add(id, "snapshot", rd.snapshots[id].Tags)
	}
	for _, id := range sortedKeys(rd.volumes) {
		add(id, "volume", rd.volumes[id].Tags)
	}
	for _, id := range sortedKeys(rd.groups) {
		add(id, "security-group", rd.groups[id].Tags)
	}
	for _, name := range sortedKeys(rd.keyPairs) {
		add(rd.keyPairs[name].ID, "key-pair", rd.keyPairs[name].Tags)
	}
	for _, id := range sortedKeys(rd.interfaces) {
		add(id, "network-interface", rd.interfaces[id].Tags)
	}
	for _, id := range sortedKeys(rd.addresses) {
		add(id, "elastic-ip", rd.addresses[id].Tags)
	}
	for _, id := range sortedKeys(rd.placementGroups) {
		add(id, "placement-group", rd.placementGroups[id].Tags)
	}
	tags, next, errResp, ok := describe(describeSpec[xmlTagDescription]{
		in: in, all: all,
		field: func(t xmlTagDescription, name string) []string {
			switch name {
			case "resource-id":
				return []string{t.ResourceID}
			case "resource-type":
				return []string{t.ResourceType}
			case "key":
				return []string{t.Key}
			case "value":
				return []string{t.Value}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	return xmlOK(xmlDescribeTags{ec2Meta: meta(), Tags: append([]xmlTagDescription{}, tags...), NextToken: next})
}

// The XML follows the element order of a real DescribeImages capture.
type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xmlTags(m map[string]string) *[]xmlTag {
	if len(m) == 0 {
		return nil
	}
	out := make([]xmlTag, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, xmlTag{k, m[k]})
	}
	return &out
}

type xmlTagDescription struct {
	ResourceID   string `xml:"resourceId"`
	ResourceType string `xml:"resourceType"`
	Key          string `xml:"key"`
	Value        string `xml:"value"`
}

type xmlDescribeTags struct {
	XMLName xml.Name `xml:"DescribeTagsResponse"`
	ec2Meta
	Tags      []xmlTagDescription `xml:"tagSet>item"`
	NextToken string              `xml:"nextToken,omitempty"`
}
