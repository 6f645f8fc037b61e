package awsfake

import (
	"net/http"
	"net/url"
	"strings"
)

// Capacity Blocks for ML. The fake keeps no reservations: a launch that targets a well-formed
// reservation (cr-..., or a resource group's ARN) is taken as launching into it. What it
// enforces is the one rule the project's bakes depend on: an UltraServer tray exists only
// inside a Capacity Block.
//
// Source (../shared/docs/grace-blackwell.md, 1.1): "p6e-gb200.36xlarge ... is sold only as
// part of an UltraServer" and "UltraServers come only through EC2 Capacity Blocks for ML" (EKS
// user guide "Use P6e-GB200 UltraServers with Amazon EKS"; ParallelCluster user guide; EC2 API
// CapacityBlock.ultraserverType). EC2 launches into a block only with
// InstanceMarketOptions.MarketType = capacity-block and the reservation as the target (EC2 User
// Guide, "Launch instances using Capacity Blocks").

// capacityBlockOnlyPrefixes are the instance types EC2 launches only into a Capacity Block.
// p6e-gb300 UltraServers are left out: no public source says how they are sold.
var capacityBlockOnlyPrefixes = []string{"p6e-gb200."}

// capacityBlockOnly reports whether EC2 launches instanceType only into a Capacity Block.
func capacityBlockOnly(instanceType string) bool {
	for _, p := range capacityBlockOnlyPrefixes {
		if strings.HasPrefix(instanceType, p) {
			return true
		}
	}
	return false
}

// DefaultCapacityBlockOnlyCode and DefaultCapacityBlockOnlyMessage are the refusal of a
// Capacity-Block-only type launched without a reservation. UNSOURCED: no public source (the
// fact sheets, AWS docs, public issues searched 2026-12-06) quotes EC2's answer to a
// p6e-gb200 launch outside a Capacity Block. "Unsupported" is the closest documented code (EC2
// API error codes: the request is unsupported, e.g. a type the zone does not offer; its
// documented message is "The requested configuration is currently not supported. Please check
// the documentation for supported configurations."); the message here adds why. Callers that
// treat "Unsupported" as a capacity refusal move on to their next candidate, as they would on
// EC2. SetCapacityBlockOnlyRefusal switches both once the real answer is known.
const (
	DefaultCapacityBlockOnlyCode    = "Unsupported"
	DefaultCapacityBlockOnlyMessage = "The requested configuration is currently not supported. %s is offered only in UltraServers, through EC2 Capacity Blocks for ML: launch it into your Capacity Block (CapacityReservationSpecification.CapacityReservationTarget with the block's reservation, InstanceMarketOptions.MarketType capacity-block)."
)

// marketTypeNotValidMessage is EC2's answer to a launch into a Capacity Block without the
// capacity-block market type, as a user quoted it (terraform-aws-modules/terraform-aws-ec2-instance
// PR 404: "InvalidParameterValue: The market type (purchasing) option is not valid. Choose a
// different market type and try again").
const marketTypeNotValidMessage = "The market type (purchasing) option is not valid. Choose a different market type and try again"

// SetCapacityBlockOnlyRefusal sets the error code and message (a format with one %s, the
// instance type) of a Capacity-Block-only type launched without a reservation; empty strings
// restore the defaults. Call it before serving.
func (s *Server) SetCapacityBlockOnlyRefusal(code, messageFormat string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.capacityBlockOnlyCode, s.capacityBlockOnlyMessage = code, messageFormat
}

// parseCapacityReservation reads CapacityReservationSpecification and InstanceMarketOptions.
func parseCapacityReservation(form url.Values, in *RunInstancesInput) error {
	const spec = "CapacityReservationSpecification."
	in.CapacityReservationPreference = form.Get(spec + "CapacityReservationPreference")
	in.CapacityReservationID = form.Get(spec + "CapacityReservationTarget.CapacityReservationId")
	in.CapacityReservationGroupARN = form.Get(spec + "CapacityReservationTarget.CapacityReservationResourceGroupArn")
	in.MarketType = form.Get("InstanceMarketOptions.MarketType")
	switch in.CapacityReservationPreference {
	case "", "open", "none", "capacity-reservations-only":
	default:
		return inputError("InvalidParameterValue", "Invalid value '%s' for CapacityReservationPreference.", in.CapacityReservationPreference)
	}
	if in.CapacityReservationID != "" && in.CapacityReservationGroupARN != "" {
		return inputError("InvalidParameterCombination", "CapacityReservationId and CapacityReservationResourceGroupArn may not be specified on the same request")
	}
	if (in.CapacityReservationID != "" || in.CapacityReservationGroupARN != "") && in.CapacityReservationPreference != "" {
		return inputError("InvalidParameterCombination", "CapacityReservationPreference and CapacityReservationTarget may not be specified on the same request")
	}
	if in.CapacityReservationID != "" {
		// The code by analogy with the fake's other ids (UNSOURCED).
		if err := checkID(in.CapacityReservationID, "cr", "InvalidCapacityReservationId.Malformed"); err != nil {
			return err
		}
	}
	if in.CapacityReservationGroupARN != "" && !strings.HasPrefix(in.CapacityReservationGroupARN, "arn:") {
		return inputError("InvalidParameterValue", "Invalid value '%s' for CapacityReservationResourceGroupArn.", in.CapacityReservationGroupARN)
	}
	switch in.MarketType {
	case "", "capacity-block", "spot":
	default:
		return inputError("InvalidParameterValue", "%s", marketTypeNotValidMessage)
	}
	return nil
}

// checkCapacityBlockOnly refuses a Capacity-Block-only type launched outside a block: without a
// reservation to target (the switchable refusal above), or targeting one without the
// capacity-block market type.
func (s *Server) checkCapacityBlockOnly(in RunInstancesInput) (response, bool) {
	if !capacityBlockOnly(in.InstanceType) {
		return response{}, true
	}
	if in.CapacityReservationID == "" && in.CapacityReservationGroupARN == "" {
		code, msg := s.capacityBlockOnlyCode, s.capacityBlockOnlyMessage
		if code == "" {
			code = DefaultCapacityBlockOnlyCode
		}
		if msg == "" {
			msg = DefaultCapacityBlockOnlyMessage
		}
		if strings.Contains(msg, "%s") {
			msg = strings.Replace(msg, "%s", in.InstanceType, 1)
		}
		return ec2Error(http.StatusBadRequest, code, msg), false
	}
	if in.MarketType != "capacity-block" {
		return ec2Error(http.StatusBadRequest, "InvalidParameterValue", marketTypeNotValidMessage), false
	}
	return response{}, true
}
