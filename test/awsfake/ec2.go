package awsfake

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

const (
	ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
	stsNamespace = "https://sts.amazonaws.com/doc/2011-06-15/"
	xmlType      = "text/xml;charset=UTF-8"
)

// ec2Proto renders EC2 query-API errors: <Response><Errors><Error>...
type ec2Proto struct{}

func ec2Error(status int, code, msg string) response {
	return xmlError(status, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Response><Errors><Error>", code, msg,
		"</Error></Errors><RequestID>"+requestID()+"</RequestID></Response>")
}

// xmlError renders a query-API error: open, the escaped Code and Message,
// then closing (EC2 and STS wrap them differently).
func xmlError(status int, open, code, msg, closing string) response {
	var b strings.Builder
	b.WriteString(open + "<Code>")
	_ = xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString("</Message>" + closing)
	return response{status: status, contentType: xmlType, body: b.String()}
}

func (ec2Proto) throttle() response {
	return ec2Error(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
}

func (ec2Proto) serverError() response {
	return ec2Error(http.StatusInternalServerError, "InternalError", "An internal error has occurred")
}

func (ec2Proto) denied(account, op, _ string) response {
	return ec2Error(http.StatusForbidden, "UnauthorizedOperation", fmt.Sprintf(
		"You are not authorized to perform this operation. User: arn:aws:sts::%s:assumed-role/packer-ci/bake is not authorized to perform: ec2:%s because no identity-based policy allows the ec2:%s action", account, op, op))
}

func (ec2Proto) malformed() response {
	return response{status: http.StatusOK, contentType: xmlType, body: `<DescribeImagesResponse xmlns="` + ec2Namespace + `"><requestId>1</requestId><imagesSet><item><imageId>ami-0`}
}

func badRequest(code, format string, args ...any) response {
	return ec2Error(http.StatusBadRequest, code, fmt.Sprintf(format, args...))
}

func (s *Server) queryRequest(body []byte, scope CredentialScope, scopeErr error) (request, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return request{proto: ec2Proto{}}, &wireError{ec2Error(http.StatusBadRequest, "MalformedQueryString", err.Error())}
	}
	action := form.Get("Action")
	if req, ok, err := s.autoscalingRequest(action, form, scope, scopeErr); ok {
		return req, err
	}
	switch action {
	case OpAssumeRole, OpGetCallerIdentity:
		req := request{op: action, proto: stsProto{}, resource: "*"}
		if action == OpAssumeRole {
			req.resource = form.Get("RoleArn")
		}
		if scopeErr != nil {
			return req, &wireError{stsError(http.StatusForbidden, "IncompleteSignature", scopeErr.Error())}
		}
		if v := form.Get("Version"); v != "2011-06-15" {
			return req, &wireError{stsError(http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Unsupported Version %q (STS speaks 2011-06-15)", v))}
		}
		if action == OpAssumeRole {
			req.handle = func() response { return s.assumeRole(form) }
		} else {
			req.handle = func() response { return s.getCallerIdentity(scope.Region, scope.AccessKeyID) }
		}
		return req, nil
	}
	rt, ok := ec2RouteByAction[action]
	if !ok {
		return request{op: action, proto: ec2Proto{}}, &wireError{ec2Error(http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %q is not valid for this web service.", action))}
	}
	req := request{op: action, proto: ec2Proto{}, resource: "*"}
	if scopeErr != nil {
		return req, &wireError{ec2Error(http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials: "+scopeErr.Error())}
	}
	if v := form.Get("Version"); v != "2016-11-15" {
		return req, &wireError{ec2Error(http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Unsupported Version %q", v))}
	}
	// Parse errors are "Code: message" (inputError).
	handle, err := rt.prepare(s, scope.Region, form)
	if err != nil {
		code, msg, _ := strings.Cut(err.Error(), ": ")
		return req, &wireError{ec2Error(http.StatusBadRequest, code, msg)}
	}
	if form.Get("DryRun") == "true" {
		return req, &wireError{ec2Error(http.StatusPreconditionFailed, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")}
	}
	req.handle = handle
	return req, nil
}

// ec2Route ties an EC2 action to the parser of its input and the handler
// that answers it.
type ec2Route struct {
	action  string
	prepare func(s *Server, region string, form url.Values) (func() response, error)
}

// route builds an ec2Route from a parser and a handler of the same input.
func route[In any](action string, parse func(url.Values) (In, error), handle func(s *Server, region string, in In) response) ec2Route {
	return ec2Route{action: action, prepare: func(s *Server, region string, form url.Values) (func() response, error) {
		in, err := parse(form)
		return func() response { return handle(s, region, in) }, err
	}}
}

// ec2Routes are the EC2 actions the fake answers, in the README's order.
var ec2Routes = []ec2Route{
	route(OpDescribeImages, ParseDescribeImages, (*Server).describeImages),
	route(OpDescribeRegions, ParseDescribeRegions, func(_ *Server, _ string, in DescribeRegionsInput) response { return describeRegions(in) }),
	route(OpDescribeVpcs, ParseDescribeVpcs, (*Server).describeVpcs),
	route(OpDescribeSubnets, ParseDescribeSubnets, (*Server).describeSubnets),
	route(OpDescribeInstanceTypeOfferings, ParseDescribeInstanceTypeOfferings, func(_ *Server, region string, in DescribeOfferingsInput) response {
		return describeOfferings(region, in)
	}),
	route(OpCreateKeyPair, ParseCreateKeyPair, (*Server).createKeyPair),
	route(OpDescribeKeyPairs, ParseDescribeKeyPairs, (*Server).describeKeyPairs),
	route(OpDeleteKeyPair, ParseDeleteKeyPair, (*Server).deleteKeyPair),
	route(OpCreateSecurityGroup, ParseCreateSecurityGroup, (*Server).createSecurityGroup),
	route(OpAuthorizeSecurityGroupIngress, ParseAuthorizeIngress, (*Server).authorizeIngress),
	route(OpDescribeSecurityGroups, ParseDescribeSecurityGroups, (*Server).describeSecurityGroups),
	route(OpDeleteSecurityGroup, ParseDeleteSecurityGroup, (*Server).deleteSecurityGroup),
	route(OpAuthorizeSecurityGroupEgress, ParseAuthorizeIngress, (*Server).authorizeEgress),
	route(OpRevokeSecurityGroupIngress, ParseAuthorizeIngress, (*Server).revokeIngress),
	route(OpRevokeSecurityGroupEgress, ParseAuthorizeIngress, (*Server).revokeEgress),
	route(OpDescribeInstanceTypes, ParseDescribeInstanceTypes, (*Server).describeInstanceTypes),
	route(OpCreatePlacementGroup, ParseCreatePlacementGroup, (*Server).createPlacementGroup),
	route(OpDescribePlacementGroups, ParseDescribePlacementGroups, (*Server).describePlacementGroups),
	route(OpDeletePlacementGroup, ParseDeletePlacementGroup, (*Server).deletePlacementGroup),
	route(OpRunInstances, ParseRunInstances, (*Server).runInstances),
	route(OpDescribeInstances, ParseDescribeInstances, (*Server).describeInstances),
	route(OpStopInstances, ParseInstanceIDs, (*Server).stopInstances),
	route(OpTerminateInstances, ParseInstanceIDs, (*Server).terminateInstances),
	route(OpDescribeNetworkInterfaces, ParseDescribeNetworkInterfaces, (*Server).describeNetworkInterfaces),
	route(OpDeleteNetworkInterface, ParseNetworkInterfaceID, (*Server).deleteNetworkInterface),
	route(OpAllocateAddress, ParseAllocateAddress, (*Server).allocateAddress),
	route(OpAssociateAddress, ParseAssociateAddress, (*Server).associateAddress),
	route(OpDisassociateAddress, ParseDisassociateAddress, (*Server).disassociateAddress),
	route(OpReleaseAddress, ParseReleaseAddress, (*Server).releaseElasticIP),
	route(OpDescribeAddresses, ParseDescribeAddresses, (*Server).describeAddresses),
	route(OpCreateTags, ParseCreateTags, (*Server).createTags),
	route(OpDescribeTags, ParseDescribeTags, (*Server).describeTags),
	route(OpCreateImage, ParseCreateImage, (*Server).createImage),
	route(OpCopyImage, ParseCopyImage, (*Server).copyImage),
	route(OpDeregisterImage, ParseImageID, (*Server).deregisterImage),
	route(OpModifyImageAttribute, ParseModifyImageAttribute, (*Server).modifyImageAttribute),
	route(OpEnableImageDeprecation, ParseEnableImageDeprecation, (*Server).enableImageDeprecation),
	route(OpDescribeSnapshots, ParseDescribeSnapshots, (*Server).describeSnapshots),
	route(OpDeleteSnapshot, ParseSnapshotID, (*Server).deleteSnapshot),
	route(OpModifySnapshotAttribute, ParseModifySnapshotAttribute, (*Server).modifySnapshotAttribute),
	route(OpDescribeVolumes, ParseDescribeVolumes, (*Server).describeVolumes),
	route(OpDeleteVolume, ParseVolumeID, (*Server).deleteVolume),
}

var ec2RouteByAction = func() map[string]ec2Route {
	m := make(map[string]ec2Route, len(ec2Routes))
	for _, r := range ec2Routes {
		m[r.action] = r
	}
	return m
}()

// The XML answers follow the aws-sdk-go-v2 ec2 deserialisers
// (awsEc2query_deserializeDocument*), which read EC2's own wire names; each
// resource file holds its own answer structs, this file the parts they share.

// ec2Meta carries the namespace and request id every EC2 answer has.
type ec2Meta struct {
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
}

func meta() ec2Meta { return ec2Meta{Xmlns: ec2Namespace, RequestID: requestID()} }

// xmlOK renders v (a struct with an XMLName) as a 200 answer.
func xmlOK(v any) response {
	b, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		return ec2Error(http.StatusInternalServerError, "InternalError", "rendering the answer: "+err.Error())
	}
	return response{status: http.StatusOK, contentType: xmlType, body: `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + string(b)}
}

// xmlReturn is the answer of calls that only say whether they worked.
type xmlReturn struct {
	XMLName xml.Name
	ec2Meta
	Return bool   `xml:"return"`
	ID     string `xml:"groupId,omitempty"`
}

func returnTrue(op string) response {
	return xmlOK(xmlReturn{XMLName: xml.Name{Local: op + "Response"}, ec2Meta: meta(), Return: true})
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

// ec2Time formats t as EC2 does in XML timestamps.
func ec2Time(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// itoa keeps the XML builders short.
func itoa(n int) string { return strconv.Itoa(n) }

func boolString(b bool) string { return strconv.FormatBool(b) }
