package awsfake

import (
	"encoding/xml"
	"net/url"
)

// Snapshot is one EBS snapshot.
type Snapshot struct {
	ID                string            `json:"id"`
	VolumeID          string            `json:"volume_id"`
	State             string            `json:"state"` // pending, completed, error
	StateMessage      string            `json:"state_message,omitempty"`
	OwnerID           string            `json:"owner_id"`
	Description       string            `json:"description,omitempty"`
	VolumeSize        int               `json:"volume_size"`
	StartTime         string            `json:"start_time"`
	Encrypted         bool              `json:"encrypted,omitempty"`
	CreateVolumeUsers []string          `json:"create_volume_users,omitempty"`
	Tags              map[string]string `json:"tags,omitempty"`
}

// PutSnapshot adds or replaces a snapshot in a region, e.g. the one a PutImage's block device
// names, so deregistering the image can delete it.
func (s *Server) PutSnapshot(region string, sn Snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sn
	c.Tags = copyTags(sn.Tags)
	c.CreateVolumeUsers = append([]string(nil), sn.CreateVolumeUsers...)
	s.region(region).snapshots[sn.ID] = &c
}

// DescribeSnapshotsInput is the decoded form of DescribeSnapshots.
type DescribeSnapshotsInput struct {
	DescribeInput
	Owners []string
}

var snapshotFilters = map[string]bool{"snapshot-id": true, "volume-id": true, "status": true, "owner-id": true, "description": true, "tag-key": true}

// ParseDescribeSnapshots decodes DescribeSnapshots.
func ParseDescribeSnapshots(form url.Values) (DescribeSnapshotsInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "SnapshotId", idPrefix: "snap", malformedCode: "InvalidSnapshotID.Malformed",
		filters: snapshotFilters, tagFilters: true, maxResultsLo: 5})
	return DescribeSnapshotsInput{DescribeInput: d, Owners: indexedList(form, "Owner")}, err
}

// ParseSnapshotID decodes DeleteSnapshot.
func ParseSnapshotID(form url.Values) (string, error) {
	id := form.Get("SnapshotId")
	if id == "" {
		return "", inputError("MissingParameter", "The request must contain the parameter SnapshotId")
	}
	return id, checkID(id, "snap", "InvalidSnapshotID.Malformed")
}

// ParseModifySnapshotAttribute decodes ModifySnapshotAttribute.
func ParseModifySnapshotAttribute(form url.Values) (AttributeInput, error) {
	in, err := parseAttribute(form, "SnapshotId", "snap", "InvalidSnapshotID.Malformed", "CreateVolumePermission")
	if err == nil && in.Description != nil {
		return in, inputError("InvalidParameterValue", "Snapshots have no description attribute to modify")
	}
	return in, err
}

func (s *Server) describeSnapshots(region string, in DescribeSnapshotsInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var all []*Snapshot
	for _, id := range sortedKeys(rd.snapshots) {
		all = append(all, rd.snapshots[id])
	}
	snaps, next, errResp, ok := describe(describeSpec[*Snapshot]{
		in: in.DescribeInput, all: all, id: func(sn *Snapshot) string { return sn.ID },
		notFound: notFoundFirst("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist."),
		keep: func(sn *Snapshot) bool {
			return len(in.Owners) == 0 || contains(in.Owners, "self") || contains(in.Owners, sn.OwnerID)
		},
		observe: func(sn *Snapshot) { s.observeSnapshot(rd, sn) },
		tags:    func(sn *Snapshot) map[string]string { return sn.Tags },
		field: func(sn *Snapshot, name string) []string {
			switch name {
			case "snapshot-id":
				return []string{sn.ID}
			case "volume-id":
				return []string{sn.VolumeID}
			case "status":
				return []string{sn.State}
			case "owner-id":
				return []string{sn.OwnerID}
			case "description":
				return []string{sn.Description}
			}
			return nil
		},
	})
	if !ok {
		return errResp
	}
	out := xmlDescribeSnapshots{ec2Meta: meta(), Snapshots: []xmlSnapshot{}, NextToken: next}
	for _, sn := range snaps {
		out.Snapshots = append(out.Snapshots, renderSnapshot(sn))
	}
	return xmlOK(out)
}

// observeSnapshot settles a pending snapshot.
func (s *Server) observeSnapshot(rd *regionData, sn *Snapshot) {
	st := rd.snapshotSettle[sn.ID]
	if st == nil || sn.State != "pending" || !s.advance(st) {
		return
	}
	delete(rd.snapshotSettle, sn.ID)
	if err := st.work.err; err != nil {
		sn.State, sn.StateMessage = "error", err.Error()
		return
	}
	sn.State = "completed"
}

func (s *Server) deleteSnapshot(region, id string) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if rd.snapshots[id] == nil {
		return badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
	}
	for _, imgID := range sortedKeys(rd.images) {
		for _, bd := range rd.images[imgID].BlockDevices {
			if bd.SnapshotID == id {
				return badRequest("InvalidSnapshot.InUse", "The snapshot %s is currently in use by %s", id, imgID)
			}
		}
	}
	delete(rd.snapshots, id)
	delete(rd.snapshotSettle, id)
	return returnTrue(OpDeleteSnapshot)
}

func (s *Server) modifySnapshotAttribute(region string, in AttributeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.region(region).snapshots[in.ResourceID]
	if sn == nil {
		return badRequest("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", in.ResourceID)
	}
	sn.CreateVolumeUsers = in.changeUsers(sn.CreateVolumeUsers)
	return returnTrue(OpModifySnapshotAttribute)
}

type xmlSnapshot struct {
	SnapshotID    string    `xml:"snapshotId"`
	VolumeID      string    `xml:"volumeId"`
	Status        string    `xml:"status"`
	StatusMessage string    `xml:"statusMessage,omitempty"`
	StartTime     string    `xml:"startTime"`
	Progress      string    `xml:"progress"`
	OwnerID       string    `xml:"ownerId"`
	VolumeSize    int       `xml:"volumeSize"`
	Description   string    `xml:"description"`
	Encrypted     bool      `xml:"encrypted"`
	StorageTier   string    `xml:"storageTier"`
	TagSet        *[]xmlTag `xml:"tagSet>item,omitempty"`
}

func renderSnapshot(sn *Snapshot) xmlSnapshot {
	progress := "100%"
	if sn.State == "pending" {
		progress = "0%"
	}
	return xmlSnapshot{SnapshotID: sn.ID, VolumeID: sn.VolumeID, Status: sn.State, StatusMessage: sn.StateMessage, StartTime: sn.StartTime,
		Progress: progress, OwnerID: sn.OwnerID, VolumeSize: sn.VolumeSize, Description: sn.Description, Encrypted: sn.Encrypted,
		StorageTier: "standard", TagSet: xmlTags(sn.Tags)}
}

type xmlDescribeSnapshots struct {
	XMLName xml.Name `xml:"DescribeSnapshotsResponse"`
	ec2Meta
	Snapshots []xmlSnapshot `xml:"snapshotSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}
