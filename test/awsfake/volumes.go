package awsfake

import (
	"encoding/xml"
	"net/url"
)

// Volume is one EBS volume.
type Volume struct {
	ID                  string            `json:"id"`
	State               string            `json:"state"` // in-use, available
	InstanceID          string            `json:"instance_id,omitempty"`
	DeviceName          string            `json:"device_name,omitempty"`
	SnapshotID          string            `json:"snapshot_id,omitempty"`
	AvailabilityZone    string            `json:"availability_zone"`
	Size                int               `json:"size"`
	VolumeType          string            `json:"volume_type"`
	DeleteOnTermination bool              `json:"delete_on_termination"`
	CreateTime          string            `json:"create_time"`
	Tags                map[string]string `json:"tags,omitempty"`
}

var volumeFilters = map[string]bool{"volume-id": true, "status": true, "attachment.instance-id": true, "snapshot-id": true, "tag-key": true}

// ParseDescribeVolumes decodes DescribeVolumes.
func ParseDescribeVolumes(form url.Values) (DescribeInput, error) {
	return parseDescribe(form, describeParams{idParam: "VolumeId", idPrefix: "vol", malformedCode: "InvalidVolumeID.Malformed",
		filters: volumeFilters, tagFilters: true, maxResultsLo: 5})
}

// ParseVolumeID decodes DeleteVolume.
func ParseVolumeID(form url.Values) (string, error) {
	id := form.Get("VolumeId")
	if id == "" {
		return "", inputError("MissingParameter", "The request must contain the parameter VolumeId")
	}
	return id, checkID(id, "vol", "InvalidVolumeID.Malformed")
}

func (s *Server) describeVolumes(region string, in DescribeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var all []*Volume
	for _, id := range sortedKeys(rd.volumes) {
		all = append(all, rd.volumes[id])
	}
	vols, next, errResp, ok := describe(describeSpec[*Volume]{
		in: in, all: all, id: func(v *Volume) string { return v.ID },
		notFound: notFoundFirst("InvalidVolume.NotFound", "The volume '%s' does not exist."),
		tags:     func(v *Volume) map[string]string { return v.Tags },
		field: func(v *Volume, name string) []string {
			switch name {
			case "volume-id":
				return []string{v.ID}
			case "status":
				return []string{v.State}
			case "attachment.instance-id":
				return []string{v.InstanceID}
			case "snapshot-id":
				return []string{v.SnapshotID}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeVolumes{ec2Meta: meta(), Volumes: []xmlVolume{}, NextToken: next}
	for _, v := range vols {
		out.Volumes = append(out.Volumes, renderVolume(v))
	}
	return xmlOK(out)
}

func (s *Server) deleteVolume(region, id string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	v := rd.volumes[id]
	if v == nil {
		return badRequest("InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
	}
	if v.State == "in-use" {
		return badRequest("VolumeInUse", "Volume %s is currently attached to %s", id, v.InstanceID)
	}
	delete(rd.volumes, id)
	return returnTrue(OpDeleteVolume)
}

type xmlVolumeAttachment struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlVolume struct {
	VolumeID         string                `xml:"volumeId"`
	Size             int                   `xml:"size"`
	SnapshotID       string                `xml:"snapshotId"`
	AvailabilityZone string                `xml:"availabilityZone"`
	Status           string                `xml:"status"`
	CreateTime       string                `xml:"createTime"`
	Attachments      []xmlVolumeAttachment `xml:"attachmentSet>item"`
	VolumeType       string                `xml:"volumeType"`
	Encrypted        bool                  `xml:"encrypted"`
	TagSet           *[]xmlTag             `xml:"tagSet>item,omitempty"`
}

func renderVolume(v *Volume) xmlVolume {
	x := xmlVolume{VolumeID: v.ID, Size: v.Size, SnapshotID: v.SnapshotID, AvailabilityZone: v.AvailabilityZone, Status: v.State,
		CreateTime: v.CreateTime, Attachments: []xmlVolumeAttachment{}, VolumeType: v.VolumeType, TagSet: xmlTags(v.Tags)}
	if v.InstanceID != "" {
		x.Attachments = append(x.Attachments, xmlVolumeAttachment{VolumeID: v.ID, InstanceID: v.InstanceID, Device: v.DeviceName,
			Status: "attached", AttachTime: v.CreateTime, DeleteOnTermination: v.DeleteOnTermination})
	}
	return x
}

type xmlDescribeVolumes struct {
	XMLName xml.Name `xml:"DescribeVolumesResponse"`
	ec2Meta
	Volumes   []xmlVolume `xml:"volumeSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}
