package awsfake

// EC2 Auto Scaling, as far as dlami-node-check's replacement request needs it: groups (made by
// the tests, each in a region, with their instances) and the query-API calls
// DescribeAutoScalingInstances and SetInstanceHealth (Version 2011-01-01, SigV4-scoped to
// service autoscaling), answered as the API reference documents: an instance id in no group is
// left out of DescribeAutoScalingInstances without an error; SetInstanceHealth of such an
// instance is a ValidationError; HealthStatus must be Healthy or Unhealthy. The fake records
// every SetInstanceHealth it accepted (the tests assert on them) and, as a group does, takes an
// instance marked Unhealthy out of service (LifecycleState Terminating).

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Auto Scaling operation names.
const (
	OpDescribeAutoScalingInstances = "DescribeAutoScalingInstances"
	OpSetInstanceHealth            = "SetInstanceHealth"
)

func autoscalingOps() []string {
	return []string{OpDescribeAutoScalingInstances, OpSetInstanceHealth}
}

const autoscalingNamespace = "http://autoscaling.amazonaws.com/doc/2011-01-01/"

// ASGInstance is one instance of a group as the fake keeps it.
type ASGInstance struct {
	InstanceID, Group, AvailabilityZone, InstanceType string
	// LifecycleState is InService unless a test or SetInstanceHealth changed it.
	LifecycleState string
	// HealthStatus is HEALTHY or UNHEALTHY (DescribeAutoScalingInstances' spelling).
	HealthStatus string
	// HealthCalls are the SetInstanceHealth calls accepted for it, in order.
	HealthCalls []SetInstanceHealthCall
}

// SetInstanceHealthCall is one accepted SetInstanceHealth.
type SetInstanceHealthCall struct {
	HealthStatus string
	// RespectGracePeriod is ShouldRespectGracePeriod as sent (absent means true, the API's
	// default).
	RespectGracePeriod bool
}

// fleetState is what the fake keeps for the fleet engines' APIs: S3 buckets (s3.go) and Auto
// Scaling instances (by region, then instance id).
type fleetState struct {
	buckets map[string]*s3Bucket
	asg     map[string]map[string]*ASGInstance
}

// PutAutoScalingGroup puts instances (ids) into group in region, InService and HEALTHY;
// instances already in a group move.
func (s *Server) PutAutoScalingGroup(region, group string, instanceIDs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fleet.asg == nil {
		s.fleet.asg = map[string]map[string]*ASGInstance{}
	}
	if s.fleet.asg[region] == nil {
		s.fleet.asg[region] = map[string]*ASGInstance{}
	}
	for _, id := range instanceIDs {
		s.fleet.asg[region][id] = &ASGInstance{InstanceID: id, Group: group, AvailabilityZone: region + "a", InstanceType: "p5.48xlarge",
			LifecycleState: "InService", HealthStatus: "HEALTHY"}
	}
}

// AutoScalingInstance returns a copy of an instance of a group in region.
func (s *Server) AutoScalingInstance(region, instanceID string) (ASGInstance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.fleet.asg[region][instanceID]
	if in == nil {
		return ASGInstance{}, false
	}
	out := *in
	out.HealthCalls = append([]SetInstanceHealthCall(nil), in.HealthCalls...)
	return out, true
}

// autoscalingProto renders the Auto Scaling query API's errors.
type autoscalingProto struct{}

func autoscalingError(status int, code, msg string) response {
	return xmlError(status, `<ErrorResponse xmlns="`+autoscalingNamespace+`"><Error><Type>Sender</Type>`, code, msg,
		"</Error><RequestId>"+requestID()+"</RequestId></ErrorResponse>")
}

func (autoscalingProto) throttle() response {
	return autoscalingError(http.StatusBadRequest, "Throttling", "Rate exceeded")
}

func (autoscalingProto) serverError() response {
	return autoscalingError(http.StatusInternalServerError, "InternalFailure", "An internal error occurred")
}

func (autoscalingProto) denied(account, op, resource string) response {
	return autoscalingError(http.StatusForbidden, "AccessDenied", fmt.Sprintf("User: arn:aws:sts::%s:assumed-role/gpu-node/i-0fake is not authorized to perform: autoscaling:%s on resource: %s because no identity-based policy allows the autoscaling:%s action", account, op, resource, op))
}

func (autoscalingProto) malformed() response {
	return response{status: http.StatusOK, contentType: xmlType, body: `<DescribeAutoScalingInstancesResponse xmlns="` + autoscalingNamespace + `"><DescribeAutoScalingInstancesResult><AutoScalingInstances><member><InstanceId>i-0`}
}

// autoscalingRequest decodes an Auto Scaling call; ok is false for an action that is not one.
func (s *Server) autoscalingRequest(action string, form url.Values, scope CredentialScope, scopeErr error) (req request, ok bool, err error) {
	if action != OpDescribeAutoScalingInstances && action != OpSetInstanceHealth {
		return request{}, false, nil
	}
	req = request{op: action, proto: autoscalingProto{}, resource: "*"}
	if scopeErr != nil {
		return req, true, &wireError{autoscalingError(http.StatusForbidden, "IncompleteSignature", scopeErr.Error())}
	}
	if scope.Service != "autoscaling" {
		return req, true, &wireError{autoscalingError(http.StatusForbidden, "SignatureDoesNotMatch", fmt.Sprintf("Credential should be scoped to correct service: 'autoscaling', not %q", scope.Service))}
	}
	if v := form.Get("Version"); v != "2011-01-01" {
		return req, true, &wireError{autoscalingError(http.StatusBadRequest, "InvalidParameterValue", fmt.Sprintf("Unsupported Version %q (Auto Scaling speaks 2011-01-01)", v))}
	}
	switch action {
	case OpDescribeAutoScalingInstances:
		ids := indexedList(form, "InstanceIds.member")
		if len(ids) > 50 {
			return req, true, &wireError{autoscalingError(http.StatusBadRequest, "ValidationError", "The number of instance ids that may be passed in is limited to 50")}
		}
		req.handle = func() response { return s.describeAutoScalingInstances(scope.Region, ids) }
	case OpSetInstanceHealth:
		id, status := form.Get("InstanceId"), form.Get("HealthStatus")
		if id == "" || (status != "Healthy" && status != "Unhealthy") {
			return req, true, &wireError{autoscalingError(http.StatusBadRequest, "ValidationError", fmt.Sprintf("InstanceId %q and HealthStatus %q: HealthStatus must be Healthy or Unhealthy", id, status))}
		}
		respect := true
		switch form.Get("ShouldRespectGracePeriod") {
		case "", "true":
		case "false":
			respect = false
		default:
			return req, true, &wireError{autoscalingError(http.StatusBadRequest, "ValidationError", "ShouldRespectGracePeriod must be true or false")}
		}
		req.resource = "arn:aws:autoscaling:" + scope.Region + ":" + s.account + ":autoScalingGroup:*"
		req.handle = func() response { return s.setInstanceHealth(scope.Region, id, status, respect) }
	}
	return req, true, nil
}

type xmlASGInstance struct {
	InstanceID           string `xml:"InstanceId"`
	AutoScalingGroupName string `xml:"AutoScalingGroupName"`
	AvailabilityZone     string `xml:"AvailabilityZone"`
	InstanceType         string `xml:"InstanceType"`
	LifecycleState       string `xml:"LifecycleState"`
	HealthStatus         string `xml:"HealthStatus"`
	ProtectedFromScaleIn bool   `xml:"ProtectedFromScaleIn"`
}

type xmlDescribeAutoScalingInstances struct {
	XMLName   xml.Name         `xml:"DescribeAutoScalingInstancesResponse"`
	Xmlns     string           `xml:"xmlns,attr"`
	Instances []xmlASGInstance `xml:"DescribeAutoScalingInstancesResult>AutoScalingInstances>member"`
	RequestID string           `xml:"ResponseMetadata>RequestId"`
}

func (s *Server) describeAutoScalingInstances(region string, ids []string) response {
	s.mu.Lock()
	doc := xmlDescribeAutoScalingInstances{Xmlns: autoscalingNamespace, RequestID: requestID()}
	for _, id := range ids {
		in := s.fleet.asg[region][id]
		if in == nil {
			continue // an id in no group is left out, without an error
		}
		doc.Instances = append(doc.Instances, xmlASGInstance{InstanceID: in.InstanceID, AutoScalingGroupName: in.Group,
			AvailabilityZone: in.AvailabilityZone, InstanceType: in.InstanceType, LifecycleState: in.LifecycleState, HealthStatus: in.HealthStatus})
	}
	s.mu.Unlock()
	b, err := xml.Marshal(doc)
	if err != nil {
		return autoscalingError(http.StatusInternalServerError, "InternalFailure", err.Error())
	}
	return response{status: http.StatusOK, contentType: xmlType, body: string(b)}
}

func (s *Server) setInstanceHealth(region, id, status string, respect bool) response {
	s.mu.Lock()
	in := s.fleet.asg[region][id]
	if in == nil {
		s.mu.Unlock()
		return autoscalingError(http.StatusBadRequest, "ValidationError", "Instance Id not found - No managed instance found for instance ID: "+id)
	}
	in.HealthCalls = append(in.HealthCalls, SetInstanceHealthCall{HealthStatus: status, RespectGracePeriod: respect})
	in.HealthStatus = strings.ToUpper(status)
	if status == "Unhealthy" && in.LifecycleState == "InService" {
		// The group takes an unhealthy instance out of service and terminates it.
		in.LifecycleState = "Terminating"
	}
	s.mu.Unlock()
	return response{status: http.StatusOK, contentType: xmlType,
		body: `<SetInstanceHealthResponse xmlns="` + autoscalingNamespace + `"><ResponseMetadata><RequestId>` + requestID() + `</RequestId></ResponseMetadata></SetInstanceHealthResponse>`}
}
