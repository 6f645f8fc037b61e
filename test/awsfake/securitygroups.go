package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// SecurityGroup is one security group.
type SecurityGroup struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	VpcID       string            `json:"vpc_id"`
	OwnerID     string            `json:"owner_id"`
	Ingress     []Permission      `json:"ingress,omitempty"`
	Egress      []Permission      `json:"egress,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// allowAllOutbound is the outbound rule EC2 gives every new group: all traffic to 0.0.0.0/0
// (VPC User Guide, "Security group rules": "a security group includes an outbound rule that
// allows all outbound traffic" until you remove it).
func allowAllOutbound() []Permission {
	return []Permission{{Protocol: "-1", FromPort: -1, ToPort: -1, CIDRs: []string{"0.0.0.0/0"}}}
}

// SecurityGroupInput is the decoded form of CreateSecurityGroup and
// DeleteSecurityGroup.
type SecurityGroupInput struct {
	GroupID     string
	GroupName   string
	Description string
	VpcID       string
	TagSpecs    []TagSpecification
}

// ParseCreateSecurityGroup decodes CreateSecurityGroup.
func ParseCreateSecurityGroup(form url.Values) (SecurityGroupInput, error) {
	in := SecurityGroupInput{GroupName: form.Get("GroupName"), Description: form.Get("GroupDescription"), VpcID: form.Get("VpcId")}
	if in.GroupName == "" || len(in.GroupName) > 255 {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupName (1 to 255 characters)")
	}
	if strings.HasPrefix(in.GroupName, "sg-") {
		return in, inputError("InvalidParameterValue", "Group names may not be in the format sg-*")
	}
	if in.Description == "" || len(in.Description) > 255 {
		return in, inputError("MissingParameter", "The request must contain the parameter GroupDescription (1 to 255 characters)")
	}
	if in.VpcID != "" {
		if err := checkID(in.VpcID, "vpc", "InvalidVpcID.Malformed"); err != nil {
			return in, err
		}
	}
	var err error
	in.TagSpecs, err = parseTagSpecifications(form, "security-group")
	return in, err
}

// ParseDeleteSecurityGroup decodes DeleteSecurityGroup (GroupId or GroupName).
func ParseDeleteSecurityGroup(form url.Values) (SecurityGroupInput, error) {
	var in SecurityGroupInput
	var err error
	in.GroupID, in.GroupName, err = parseGroupRef(form)
	return in, err
}

// parseGroupRef reads the group a call names by GroupId or GroupName.
func parseGroupRef(form url.Values) (id, name string, err error) {
	id, name = form.Get("GroupId"), form.Get("GroupName")
	if id == "" && name == "" {
		return id, name, inputError("MissingParameter", "The request must contain the parameter GroupId or GroupName")
	}
	if id != "" {
		if err := checkID(id, "sg", "InvalidGroupId.Malformed"); err != nil {
			return id, name, err
		}
	}
	return id, name, nil
}

// Permission is one ingress rule: a protocol, a port range and where from.
type Permission struct {
	Protocol string   `json:"protocol"`
	FromPort int      `json:"from_port"`
	ToPort   int      `json:"to_port"`
	CIDRs    []string `json:"cidrs,omitempty"`
	GroupIDs []string `json:"group_ids,omitempty"`
}

// AuthorizeIngressInput is the decoded form of AuthorizeSecurityGroupIngress, and of
// AuthorizeSecurityGroupEgress and both Revoke calls, which take the same rules.
type AuthorizeIngressInput struct {
	GroupID     string
	GroupName   string
	Permissions []Permission
}

var cidrShape = regexp.MustCompile(`^(\d{1,3}\.){3}\d{1,3}/\d{1,2}$|^[0-9a-fA-F:]+/\d{1,3}$`)

func parsePort(form url.Values, name string) (int, error) {
	return intParam(form, name, -1, -1, 65535)
}

// ParseAuthorizeIngress decodes AuthorizeSecurityGroupIngress, in both its
// IpPermissions.N form and the legacy top-level CidrIp/FromPort form.
func ParseAuthorizeIngress(form url.Values) (AuthorizeIngressInput, error) {
	var in AuthorizeIngressInput
	var err error
	if in.GroupID, in.GroupName, err = parseGroupRef(form); err != nil {
		return in, err
	}
	read := func(prefix string, cidrs []string, groups []string) (Permission, error) {
		p := Permission{Protocol: form.Get(prefix + "IpProtocol"), CIDRs: cidrs, GroupIDs: groups}
		var err error
		if p.FromPort, err = parsePort(form, prefix+"FromPort"); err != nil {
			return p, err
		}
		if p.ToPort, err = parsePort(form, prefix+"ToPort"); err != nil {
			return p, err
		}
		switch p.Protocol {
		case "tcp", "udp", "icmp", "-1", "all":
		case "":
			return p, inputError("MissingParameter", "The request must contain the parameter %sIpProtocol", prefix)
		default:
			return p, inputError("InvalidParameterValue", "Invalid value '%s' for IP protocol. Unknown protocol.", p.Protocol)
		}
		if (p.Protocol == "tcp" || p.Protocol == "udp") && (p.FromPort < 0 || p.ToPort < p.FromPort) {
			return p, inputError("InvalidParameterValue", "Invalid port range %d-%d for %s", p.FromPort, p.ToPort, p.Protocol)
		}
		for _, c := range p.CIDRs {
			if !cidrShape.MatchString(c) {
				return p, inputError("InvalidParameterValue", "CIDR block %s is malformed", c)
			}
		}
		return p, nil
	}
	for _, i := range listIndices(form, "IpPermissions") {
		prefix := fmt.Sprintf("IpPermissions.%d.", i)
		var cidrs []string
		for _, j := range listIndices(form, prefix+"IpRanges") {
			cidrs = append(cidrs, form.Get(fmt.Sprintf("%sIpRanges.%d.CidrIp", prefix, j)))
		}
		var groups []string
		for _, j := range listIndices(form, prefix+"Groups") {
			groups = append(groups, form.Get(fmt.Sprintf("%sGroups.%d.GroupId", prefix, j)))
		}
		p, err := read(prefix, cidrs, groups)
		if err != nil {
			return in, err
		}
		in.Permissions = append(in.Permissions, p)
	}
	if c := form.Get("CidrIp"); c != "" || form.Get("IpProtocol") != "" {
		var cidrs []string
		if c != "" {
			cidrs = []string{c}
		}
		p, err := read("", cidrs, nil)
		if err != nil {
			return in, err
		}
		in.Permissions = append(in.Permissions, p)
	}
	if len(in.Permissions) == 0 {
		return in, inputError("MissingParameter", "The request must contain the parameter IpPermissions")
	}
	return in, nil
}

var securityGroupFilters = map[string]bool{"group-id": true, "group-name": true, "vpc-id": true, "description": true, "owner-id": true, "tag-key": true}

// DescribeSecurityGroupsInput is the decoded form of DescribeSecurityGroups.
type DescribeSecurityGroupsInput struct {
	DescribeInput
	GroupNames []string
}

// ParseDescribeSecurityGroups decodes DescribeSecurityGroups.
func ParseDescribeSecurityGroups(form url.Values) (DescribeSecurityGroupsInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "GroupId", idPrefix: "sg", malformedCode: "InvalidGroupId.Malformed",
		filters: securityGroupFilters, tagFilters: true, maxResultsLo: 5})
	return DescribeSecurityGroupsInput{DescribeInput: d, GroupNames: indexedList(form, "GroupName")}, err
}

// groupByName finds a group by name in the default VPC. Runs under s.mu.
func groupByName(rd *regionData, name string) *SecurityGroup {
	for _, g := range rd.groups {
		if g.Name == name && g.VpcID == rd.vpc.ID {
			return g
		}
	}
	return nil
}

func (s *Server) createSecurityGroup(region string, in SecurityGroupInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	vpc := orDefault(in.VpcID, rd.vpc.ID)
	if vpc != rd.vpc.ID {
		return badRequest("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", vpc)
	}
	if groupByName(rd, in.GroupName) != nil {
		return badRequest("InvalidGroup.Duplicate", "The security group '%s' already exists for VPC '%s'", in.GroupName, vpc)
	}
	g := &SecurityGroup{ID: s.newID("sg"), Name: in.GroupName, Description: in.Description, VpcID: vpc, OwnerID: s.account,
		Egress: allowAllOutbound()}
	applyTags(&g.Tags, tagsFor(in.TagSpecs, "security-group"))
	rd.groups[g.ID] = g
	return xmlOK(xmlCreateSecurityGroup{ec2Meta: meta(), Return: true, GroupID: g.ID, TagSet: xmlTags(g.Tags)})
}

func (s *Server) findGroup(rd *regionData, id, name string) (*SecurityGroup, response, bool) {
	if id != "" {
		if g := rd.groups[id]; g != nil {
			return g, response{}, true
		}
		return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id), false
	}
	if g := groupByName(rd, name); g != nil {
		return g, response{}, true
	}
	return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, rd.vpc.ID), false
}

func samePermission(a, b Permission) bool {
	return normProtocol(a.Protocol) == normProtocol(b.Protocol) && a.FromPort == b.FromPort && a.ToPort == b.ToPort
}

// normProtocol: "all" is the console's name for "-1".
func normProtocol(p string) string {
	if p == "all" {
		return "-1"
	}
	return p
}

func (s *Server) authorizeIngress(region string, in AuthorizeIngressInput) response {
	return s.authorize(region, in, false)
}

func (s *Server) authorizeEgress(region string, in AuthorizeIngressInput) response {
	return s.authorize(region, in, true)
}

// rulesOf returns the group's inbound or outbound rules.
func rulesOf(g *SecurityGroup, egress bool) *[]Permission {
	if egress {
		return &g.Egress
	}
	return &g.Ingress
}

func (s *Server) authorize(region string, in AuthorizeIngressInput, egress bool) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	g, errResp, ok := s.findGroup(rd, in.GroupID, in.GroupName)
	if !ok {
		return errResp
	}
	rules := rulesOf(g, egress)
	direction := "ALLOW"
	for _, p := range in.Permissions {
		for _, id := range p.GroupIDs {
			if rd.groups[id] == nil {
				return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
			}
		}
		for _, have := range *rules {
			if !samePermission(have, p) {
				continue
			}
			for _, c := range p.CIDRs {
				if contains(have.CIDRs, c) {
					return badRequest("InvalidPermission.Duplicate", "the specified rule \"peer: %s, %s, from port: %d, to port: %d, %s\" already exists",
						c, strings.ToUpper(p.Protocol), p.FromPort, p.ToPort, direction)
				}
			}
			for _, id := range p.GroupIDs {
				if contains(have.GroupIDs, id) {
					return badRequest("InvalidPermission.Duplicate", "the specified rule \"peer: %s, %s, from port: %d, to port: %d, %s\" already exists",
						id, strings.ToUpper(p.Protocol), p.FromPort, p.ToPort, direction)
				}
			}
		}
	}
	for _, p := range in.Permissions {
		p.CIDRs = append([]string(nil), p.CIDRs...)
		p.GroupIDs = append([]string(nil), p.GroupIDs...)
		*rules = append(*rules, p)
	}
	s.securityGroupsChanged(rd)
	if egress {
		return returnTrue(OpAuthorizeSecurityGroupEgress)
	}
	return returnTrue(OpAuthorizeSecurityGroupIngress)
}

func (s *Server) revokeIngress(region string, in AuthorizeIngressInput) response {
	return s.revoke(region, in, false)
}

func (s *Server) revokeEgress(region string, in AuthorizeIngressInput) response {
	return s.revoke(region, in, true)
}

// revoke removes the named sources (CIDRs, groups) from the matching rules. As the reference
// says for VPC groups, rules that match nothing are no error: the answer lists them in
// unknownIpPermissionSet.
func (s *Server) revoke(region string, in AuthorizeIngressInput, egress bool) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	g, errResp, ok := s.findGroup(rd, in.GroupID, in.GroupName)
	if !ok {
		return errResp
	}
	rules := rulesOf(g, egress)
	var unknown []Permission
	for _, p := range in.Permissions {
		hit := false
		for i := range *rules {
			have := &(*rules)[i]
			if !samePermission(*have, p) {
				continue
			}
			for _, c := range p.CIDRs {
				if j := slices.Index(have.CIDRs, c); j >= 0 {
					have.CIDRs = slices.Delete(have.CIDRs, j, j+1)
					hit = true
				}
			}
			for _, id := range p.GroupIDs {
				if j := slices.Index(have.GroupIDs, id); j >= 0 {
					have.GroupIDs = slices.Delete(have.GroupIDs, j, j+1)
					hit = true
				}
			}
		}
		if !hit {
			unknown = append(unknown, p)
		}
	}
	*rules = slices.DeleteFunc(*rules, func(p Permission) bool { return len(p.CIDRs) == 0 && len(p.GroupIDs) == 0 })
	s.securityGroupsChanged(rd)
	op := OpRevokeSecurityGroupIngress
	if egress {
		op = OpRevokeSecurityGroupEgress
	}
	out := xmlRevoke{XMLName: xml.Name{Local: op + "Response"}, ec2Meta: meta(), Return: true}
	for _, p := range unknown {
		out.Unknown = append(out.Unknown, renderPermission(g, p))
	}
	return xmlOK(out)
}

type xmlRevoke struct {
	XMLName xml.Name
	ec2Meta
	Return  bool              `xml:"return"`
	Unknown []xmlIPPermission `xml:"unknownIpPermissionSet>item,omitempty"`
}

func (s *Server) describeSecurityGroups(region string, in DescribeSecurityGroupsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	for _, name := range in.GroupNames {
		if groupByName(rd, name) == nil {
			return badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", name, rd.vpc.ID)
		}
	}
	var all []*SecurityGroup
	for _, id := range sortedKeys(rd.groups) {
		all = append(all, rd.groups[id])
	}
	groups, next, errResp, ok := describe(describeSpec[*SecurityGroup]{
		in: in.DescribeInput, all: all, id: func(g *SecurityGroup) string { return g.ID },
		notFound: notFoundFirst("InvalidGroup.NotFound", "The security group '%s' does not exist"),
		keep:     func(g *SecurityGroup) bool { return len(in.GroupNames) == 0 || contains(in.GroupNames, g.Name) },
		tags:     func(g *SecurityGroup) map[string]string { return g.Tags },
		field: func(g *SecurityGroup, name string) []string {
			switch name {
			case "group-id":
				return []string{g.ID}
			case "group-name":
				return []string{g.Name}
			case "vpc-id":
				return []string{g.VpcID}
			case "description":
				return []string{g.Description}
			case "owner-id":
				return []string{g.OwnerID}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeSecurityGroups{ec2Meta: meta(), Groups: []xmlSecurityGroup{}, NextToken: next}
	for _, g := range groups {
		out.Groups = append(out.Groups, renderSecurityGroup(g))
	}
	return xmlOK(out)
}

func (s *Server) deleteSecurityGroup(region string, in SecurityGroupInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	g, errResp, ok := s.findGroup(rd, in.GroupID, in.GroupName)
	if !ok {
		return errResp
	}
	if g.Name == "default" {
		return badRequest("CannotDelete", "the specified group: \"%s\" name: \"default\" cannot be deleted by a user", g.ID)
	}
	for _, r := range rd.instances {
		if r.State != StateTerminated && contains(r.SecurityGroupIDs, g.ID) {
			return badRequest("DependencyViolation", "resource %s has a dependent object", g.ID)
		}
	}
	if interfacesUsingGroup(rd, g.ID) {
		return badRequest("DependencyViolation", "resource %s has a dependent object", g.ID)
	}
	delete(rd.groups, g.ID)
	return xmlOK(xmlReturn{XMLName: xml.Name{Local: "DeleteSecurityGroupResponse"}, ec2Meta: meta(), Return: true, ID: g.ID})
}

type xmlCreateSecurityGroup struct {
	XMLName xml.Name `xml:"CreateSecurityGroupResponse"`
	ec2Meta
	Return  bool      `xml:"return"`
	GroupID string    `xml:"groupId"`
	TagSet  *[]xmlTag `xml:"tagSet>item,omitempty"`
}

type xmlIPRange struct {
	CidrIP string `xml:"cidrIp"`
}

type xmlUserGroupPair struct {
	UserID  string `xml:"userId"`
	GroupID string `xml:"groupId"`
}

type xmlIPPermission struct {
	IPProtocol string             `xml:"ipProtocol"`
	FromPort   *int               `xml:"fromPort,omitempty"`
	ToPort     *int               `xml:"toPort,omitempty"`
	Groups     []xmlUserGroupPair `xml:"groups>item"`
	IPRanges   []xmlIPRange       `xml:"ipRanges>item"`
}

type xmlSecurityGroup struct {
	OwnerID          string            `xml:"ownerId"`
	GroupID          string            `xml:"groupId"`
	GroupName        string            `xml:"groupName"`
	GroupDescription string            `xml:"groupDescription"`
	VpcID            string            `xml:"vpcId"`
	IPPermissions    []xmlIPPermission `xml:"ipPermissions>item"`
	IPPermissionsOut []xmlIPPermission `xml:"ipPermissionsEgress>item"`
	TagSet           *[]xmlTag         `xml:"tagSet>item,omitempty"`
}

func renderSecurityGroup(g *SecurityGroup) xmlSecurityGroup {
	x := xmlSecurityGroup{OwnerID: g.OwnerID, GroupID: g.ID, GroupName: g.Name, GroupDescription: g.Description, VpcID: g.VpcID,
		IPPermissions: []xmlIPPermission{}, IPPermissionsOut: []xmlIPPermission{}, TagSet: xmlTags(g.Tags)}
	for _, p := range g.Ingress {
		x.IPPermissions = append(x.IPPermissions, renderPermission(g, p))
	}
	for _, p := range g.Egress {
		x.IPPermissionsOut = append(x.IPPermissionsOut, renderPermission(g, p))
	}
	return x
}

func renderPermission(g *SecurityGroup, p Permission) xmlIPPermission {
	xp := xmlIPPermission{IPProtocol: normProtocol(p.Protocol)}
	if p.FromPort >= 0 && xp.IPProtocol != "-1" {
		from, to := p.FromPort, p.ToPort
		xp.FromPort, xp.ToPort = &from, &to
	}
	for _, c := range p.CIDRs {
		xp.IPRanges = append(xp.IPRanges, xmlIPRange{c})
	}
	for _, id := range p.GroupIDs {
		xp.Groups = append(xp.Groups, xmlUserGroupPair{UserID: g.OwnerID, GroupID: id})
	}
	return xp
}

type xmlDescribeSecurityGroups struct {
	XMLName xml.Name `xml:"DescribeSecurityGroupsResponse"`
	ec2Meta
	Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
	NextToken string             `xml:"nextToken,omitempty"`
}
