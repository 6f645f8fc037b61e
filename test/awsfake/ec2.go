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
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Response><Errors><Error><Code>")
	_ = xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	_ = xml.EscapeText(&b, []byte(msg))
	b.WriteString("</Message></Error></Errors><RequestID>" + requestID() + "</RequestID></Response>")
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
	if !contains(ec2Ops(), action) {
		return request{op: action, proto: ec2Proto{}}, &wireError{ec2Error(http.StatusBadRequest, "InvalidAction", fmt.Sprintf("The action %q is not valid for this web service.", action))}
	}
	req := request{op: action, proto: ec2Proto{}, resource: "*"}
	if scopeErr != nil {
		return req, &wireError{ec2Error(http.StatusUnauthorized, "AuthFailure", "AWS was not able to validate the provided access credentials: "+scopeErr.Error())}
	}
	if v := form.Get("Version"); v != "2016-11-15" {
		return req, &wireError{ec2Error(http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Unsupported Version %q", v))}
	}
	handle, err := s.ec2Handler(action, scope.Region, form)
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

// ec2Handler parses one EC2 action and returns the function that answers
// it. Parse errors come back as "Code: message" errors.
func (s *Server) ec2Handler(action, region string, form url.Values) (func() response, error) {
	switch action {
	case OpDescribeImages:
		in, err := ParseDescribeImages(form)
		return func() response { return s.describeImages(region, in) }, err
	case OpDescribeRegions:
		in, err := ParseDescribeRegions(form)
		return func() response { return describeRegions(in) }, err
	case OpDescribeVpcs:
		in, err := ParseDescribeVpcs(form)
		return func() response { return s.describeVpcs(region, in) }, err
	case OpDescribeSubnets:
		in, err := ParseDescribeSubnets(form)
		return func() response { return s.describeSubnets(region, in) }, err
	case OpDescribeInstanceTypeOfferings:
		in, err := ParseDescribeInstanceTypeOfferings(form)
		return func() response { return describeOfferings(region, in) }, err
	case OpCreateKeyPair:
		in, err := ParseCreateKeyPair(form)
		return func() response { return s.createKeyPair(region, in) }, err
	case OpDescribeKeyPairs:
		in, err := ParseDescribeKeyPairs(form)
		return func() response { return s.describeKeyPairs(region, in) }, err
	case OpDeleteKeyPair:
		in, err := ParseDeleteKeyPair(form)
		return func() response { return s.deleteKeyPair(region, in) }, err
	case OpCreateSecurityGroup:
		in, err := ParseCreateSecurityGroup(form)
		return func() response { return s.createSecurityGroup(region, in) }, err
	case OpAuthorizeSecurityGroupIngress:
		in, err := ParseAuthorizeIngress(form)
		return func() response { return s.authorizeIngress(region, in) }, err
	case OpDescribeSecurityGroups:
		in, err := ParseDescribeSecurityGroups(form)
		return func() response { return s.describeSecurityGroups(region, in) }, err
	case OpDeleteSecurityGroup:
		in, err := ParseDeleteSecurityGroup(form)
		return func() response { return s.deleteSecurityGroup(region, in) }, err
	case OpRunInstances:
		in, err := ParseRunInstances(form)
		return func() response { return s.runInstances(region, in) }, err
	case OpDescribeInstances:
		in, err := ParseDescribeInstances(form)
		return func() response { return s.describeInstances(region, in) }, err
	case OpStopInstances:
		ids, err := ParseInstanceIDs(form)
		return func() response { return s.stopInstances(region, ids) }, err
	case OpTerminateInstances:
		ids, err := ParseInstanceIDs(form)
		return func() response { return s.terminateInstances(region, ids) }, err
	case OpCreateTags:
		in, err := ParseCreateTags(form)
		return func() response { return s.createTags(region, in) }, err
	case OpDescribeTags:
		in, err := ParseDescribeTags(form)
		return func() response { return s.describeTags(region, in) }, err
	case OpCreateImage:
		in, err := ParseCreateImage(form)
		return func() response { return s.createImage(region, in) }, err
	case OpCopyImage:
		in, err := ParseCopyImage(form)
		return func() response { return s.copyImage(region, in) }, err
	case OpDeregisterImage:
		in, err := ParseImageID(form)
		return func() response { return s.deregisterImage(region, in) }, err
	case OpModifyImageAttribute:
		in, err := ParseModifyImageAttribute(form)
		return func() response { return s.modifyImageAttribute(region, in) }, err
	case OpEnableImageDeprecation:
		in, err := ParseImageID(form)
		if err == nil {
			if _, perr := time.Parse(time.RFC3339, in.DeprecateAt); perr != nil {
				err = inputError("InvalidParameterValue", "DeprecateAt %q is not an RFC 3339 time", in.DeprecateAt)
			}
		}
		return func() response { return s.enableImageDeprecation(region, in) }, err
	case OpDescribeSnapshots:
		in, err := ParseDescribeSnapshots(form)
		return func() response { return s.describeSnapshots(region, in) }, err
	case OpDeleteSnapshot:
		id, err := ParseSnapshotID(form)
		return func() response { return s.deleteSnapshot(region, id) }, err
	case OpModifySnapshotAttribute:
		in, err := ParseModifySnapshotAttribute(form)
		return func() response { return s.modifySnapshotAttribute(region, in) }, err
	case OpDescribeVolumes:
		in, err := ParseDescribeVolumes(form)
		return func() response { return s.describeVolumes(region, in) }, err
	case OpDeleteVolume:
		id, err := ParseVolumeID(form)
		return func() response { return s.deleteVolume(region, id) }, err
	}
	return nil, inputError("InvalidAction", "The action %s is not valid for this web service.", action)
}

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
