package awsfake

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Image is one AMI as the fake stores it. Times are EC2's ISO-8601 strings
// ("2026-10-02T09:12:34.000Z") so they round-trip unchanged.
type Image struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Description        string            `json:"description,omitempty"`
	OwnerID            string            `json:"owner_id"`
	OwnerAlias         string            `json:"owner_alias,omitempty"`
	State              string            `json:"state,omitempty"` // default "available"
	Architecture       string            `json:"architecture"`
	CreationDate       string            `json:"creation_date,omitempty"`
	DeprecationTime    string            `json:"deprecation_time,omitempty"`
	RootDeviceName     string            `json:"root_device_name,omitempty"`
	RootDeviceType     string            `json:"root_device_type,omitempty"`    // default "ebs"
	VirtualizationType string            `json:"virtualization_type,omitempty"` // default "hvm"
	Public             bool              `json:"public,omitempty"`
	Tags               map[string]string `json:"tags,omitempty"`
	// Layers are the root filesystem layers a simulated host boots from,
	// lowest first; empty means the base DLAMI root filesystem.
	Layers []string `json:"layers,omitempty"`
	// BlockDevices are the image's block device mappings; when empty and
	// RootDeviceName is set, DescribeImages reports one invented root snapshot.
	BlockDevices       []BlockDevice `json:"block_devices,omitempty"`
	LaunchUsers        []string      `json:"launch_users,omitempty"` // accounts granted launch permission
	SourceInstanceID   string        `json:"source_instance_id,omitempty"`
	SourceImageID      string        `json:"source_image_id,omitempty"` // CopyImage's source
	SourceRegion       string        `json:"source_region,omitempty"`
	StateReasonCode    string        `json:"state_reason_code,omitempty"`
	StateReasonMessage string        `json:"state_reason_message,omitempty"`
}

// cloneImage copies img so the caller's maps and slices stay its own.
func cloneImage(img Image) Image {
	c := img
	c.Tags = copyTags(img.Tags)
	c.Layers = append([]string(nil), img.Layers...)
	c.BlockDevices = append([]BlockDevice(nil), img.BlockDevices...)
	c.LaunchUsers = append([]string(nil), img.LaunchUsers...)
	return c
}

// PutImage adds or replaces an image in a region.
func (s *Server) PutImage(region string, img Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := cloneImage(img)
	s.region(region).images[img.ID] = &c
}

// UpdateImage changes an existing image in place; it reports whether the
// image existed. Use it to deprecate, deregister or re-own an image.
func (s *Server) UpdateImage(region, id string, fn func(*Image)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	img := s.region(region).images[id]
	if img == nil {
		return false
	}
	fn(img)
	return true
}

// DeleteImage removes an image, as a completed deregistration does.
func (s *Server) DeleteImage(region, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.region(region).images, id)
}

// deregisteredImage is an image as it was deregistered, and when.
type deregisteredImage struct {
	img Image
	at  time.Time
}

// DeregisteredVisible is how long a deregistered image still answers DescribeImages by id.
// EC2 documents "a short interval" and no figure; a minute covers the calls a client makes
// right after deregistering (amazon-ebs's artifact cleanup describes the image again).
const DeregisteredVisible = time.Minute

// BlockDevice is one block device mapping of a launch or an image.
type BlockDevice struct {
	DeviceName          string `json:"device_name"`
	SnapshotID          string `json:"snapshot_id,omitempty"`
	VolumeSize          int    `json:"volume_size,omitempty"` // GiB
	VolumeType          string `json:"volume_type,omitempty"`
	DeleteOnTermination bool   `json:"delete_on_termination"`
	Encrypted           bool   `json:"encrypted,omitempty"`
	NoDevice            bool   `json:"no_device,omitempty"`
	VirtualName         string `json:"virtual_name,omitempty"`
}

func parseBlockDevices(form url.Values) ([]BlockDevice, error) {
	var out []BlockDevice
	for _, i := range listIndices(form, "BlockDeviceMapping") {
		p := fmt.Sprintf("BlockDeviceMapping.%d.", i)
		bd := BlockDevice{DeviceName: form.Get(p + "DeviceName"), SnapshotID: form.Get(p + "Ebs.SnapshotId"),
			VolumeType: form.Get(p + "Ebs.VolumeType"), VirtualName: form.Get(p + "VirtualName")}
		if bd.DeviceName == "" {
			return nil, inputError("InvalidBlockDeviceMapping", "BlockDeviceMapping.%d.DeviceName is required", i)
		}
		_, bd.NoDevice = form[p+"NoDevice"]
		var err error
		if bd.VolumeSize, err = intParam(form, p+"Ebs.VolumeSize", 0, 1, 65536); err != nil {
			return nil, err
		}
		dot := form.Get(p + "Ebs.DeleteOnTermination")
		if bd.DeleteOnTermination, err = boolParam(form, p+"Ebs.DeleteOnTermination"); err != nil {
			return nil, err
		}
		if dot == "" {
			bd.DeleteOnTermination = true
		}
		if bd.Encrypted, err = boolParam(form, p+"Ebs.Encrypted"); err != nil {
			return nil, err
		}
		switch bd.VolumeType {
		case "", "gp2", "gp3", "io1", "io2", "st1", "sc1", "standard":
		default:
			return nil, inputError("InvalidParameterValue", "Value (%s) for parameter volumeType is invalid. Valid types: gp2, gp3, io1, io2, st1, sc1, standard", bd.VolumeType)
		}
		if bd.SnapshotID != "" {
			if err := checkID(bd.SnapshotID, "snap", "InvalidSnapshotID.Malformed"); err != nil {
				return nil, err
			}
		}
		out = append(out, bd)
	}
	return out, nil
}

// defaultRootVolumeGiB is the DLAMI's root volume size.
const defaultRootVolumeGiB = 75

// imageBlockDevices returns the image's block devices, inventing the root
// snapshot for seeded images that carry only a root device name.
func imageBlockDevices(img *Image) []BlockDevice {
	if len(img.BlockDevices) > 0 {
		return append([]BlockDevice(nil), img.BlockDevices...)
	}
	return []BlockDevice{{DeviceName: orDefault(img.RootDeviceName, "/dev/sda1"), SnapshotID: "snap-" + strings.TrimPrefix(img.ID, "ami-"),
		VolumeSize: defaultRootVolumeGiB, VolumeType: "gp3", DeleteOnTermination: true}}
}

// DescribeImagesInput is the decoded form of a DescribeImages call.
type DescribeImagesInput struct {
	ImageIDs          []string
	Owners            []string
	Filters           []ImageFilter
	IncludeDeprecated bool
	MaxResults        int
	NextToken         string
}

var knownImageFilters = map[string]bool{
	"name": true, "image-id": true, "owner-id": true, "owner-alias": true, "architecture": true,
	"state": true, "is-public": true, "root-device-type": true, "root-device-name": true,
	"virtualization-type": true, "tag-key": true, "description": true, "image-type": true,
}

// ParseDescribeImages decodes a DescribeImages query body. It never panics
// and rejects what EC2 rejects: unknown filters, bad MaxResults, MaxResults
// together with ImageId.
func ParseDescribeImages(form url.Values) (DescribeImagesInput, error) {
	d, err := parseDescribe(form, describeParams{idParam: "ImageId", filters: knownImageFilters, tagFilters: true, maxResultsLo: 1})
	in := DescribeImagesInput{ImageIDs: d.IDs, Owners: indexedList(form, "Owner"), Filters: d.Filters,
		IncludeDeprecated: form.Get("IncludeDeprecated") == "true", MaxResults: d.MaxResults, NextToken: d.NextToken}
	return in, err
}

func (s *Server) visibleTo(img *Image) bool {
	return img.Public || img.OwnerID == s.account || contains(img.LaunchUsers, s.account)
}

func (s *Server) launchable(img *Image) bool {
	return s.visibleTo(img) && img.State != "deregistered"
}

func (s *Server) ownerMatches(img *Image, owners []string) bool {
	if len(owners) == 0 {
		return true
	}
	for _, o := range owners {
		switch o {
		case "self":
			if img.OwnerID == s.account {
				return true
			}
		case "amazon", "aws-marketplace", "aws-backup-vault":
			if img.OwnerAlias == o {
				return true
			}
		default:
			if img.OwnerID == o {
				return true
			}
		}
	}
	return false
}

func (s *Server) deprecated(img *Image) bool {
	if img.DeprecationTime == "" {
		return false
	}
	t, err := time.Parse(time.RFC3339, img.DeprecationTime)
	return err == nil && !t.After(s.now())
}

func imageField(img *Image, name string) []string {
	switch name {
	case "name":
		return []string{img.Name}
	case "image-id":
		return []string{img.ID}
	case "owner-id":
		return []string{img.OwnerID}
	case "owner-alias":
		return []string{img.OwnerAlias}
	case "architecture":
		return []string{img.Architecture}
	case "state":
		return []string{orDefault(img.State, "available")}
	case "is-public":
		return []string{boolString(img.Public)}
	case "root-device-type":
		return []string{orDefault(img.RootDeviceType, "ebs")}
	case "root-device-name":
		return []string{img.RootDeviceName}
	case "virtualization-type":
		return []string{orDefault(img.VirtualizationType, "hvm")}
	case "description":
		return []string{img.Description}
	case "image-type":
		return []string{"machine"}
	}
	return nil
}

func (s *Server) describeImages(region string, in DescribeImagesInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	var all []*Image
	for _, img := range rd.images {
		if s.visibleTo(img) {
			all = append(all, img)
		}
	}
	// A lately deregistered image still answers a lookup by its id.
	for _, id := range in.ImageIDs {
		if d, ok := rd.deregistered[id]; rd.images[id] == nil && ok && s.now().Sub(d.at) < DeregisteredVisible && s.visibleTo(&d.img) {
			gone := cloneImage(d.img)
			all = append(all, &gone)
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].ID < all[b].ID })
	images, next, errResp, ok := describe(describeSpec[*Image]{
		in:  DescribeInput{IDs: in.ImageIDs, Filters: in.Filters, MaxResults: in.MaxResults, NextToken: in.NextToken},
		all: all, id: func(img *Image) string { return img.ID },
		notFound: notFoundFirst("InvalidAMIID.NotFound", "The image id '[%s]' does not exist"),
		keep: func(img *Image) bool {
			// EC2 hides deprecated images from filter searches unless asked, but
			// not from lookups by id and never from their owner.
			return s.ownerMatches(img, in.Owners) &&
				(len(in.ImageIDs) > 0 || in.IncludeDeprecated || img.OwnerID == s.account || !s.deprecated(img))
		},
		observe: func(img *Image) { s.observeImage(rd, img) },
		tags:    func(img *Image) map[string]string { return img.Tags },
		field:   imageField,
	})
	if !ok {
		return errResp
	}
	return renderDescribeImages(images, next)
}

// observeImage settles a pending image (and is a no-op for others).
func (s *Server) observeImage(rd *regionData, img *Image) {
	st := rd.imageSettle[img.ID]
	if st == nil || img.State != "pending" || !s.advance(st) {
		return
	}
	delete(rd.imageSettle, img.ID)
	err := st.work.err
	if err != nil {
		img.State = "failed"
		img.StateReasonCode = "Server.InternalError"
		img.StateReasonMessage = "Server.InternalError: capturing the instance's disk failed: " + err.Error()
	} else {
		img.State = "available"
	}
	// An image is available only once its snapshots are complete, whether
	// or not anyone polled them.
	for _, bd := range img.BlockDevices {
		sn := rd.snapshots[bd.SnapshotID]
		if sn == nil || sn.State != "pending" {
			continue
		}
		delete(rd.snapshotSettle, sn.ID)
		if err != nil {
			sn.State, sn.StateMessage = "error", err.Error()
		} else {
			sn.State = "completed"
		}
	}
}

type xmlEBS struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int    `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

type xmlBDM struct {
	DeviceName string `xml:"deviceName"`
	EBS        xmlEBS `xml:"ebs"`
}

type xmlImage struct {
	ImageID            string          `xml:"imageId"`
	ImageLocation      string          `xml:"imageLocation"`
	ImageState         string          `xml:"imageState"`
	ImageOwnerID       string          `xml:"imageOwnerId"`
	CreationDate       string          `xml:"creationDate"`
	IsPublic           bool            `xml:"isPublic"`
	Architecture       string          `xml:"architecture"`
	ImageType          string          `xml:"imageType"`
	ImageOwnerAlias    string          `xml:"imageOwnerAlias,omitempty"`
	Name               string          `xml:"name"`
	Description        string          `xml:"description,omitempty"`
	RootDeviceType     string          `xml:"rootDeviceType"`
	RootDeviceName     string          `xml:"rootDeviceName,omitempty"`
	BlockDeviceMapping []xmlBDM        `xml:"blockDeviceMapping>item"`
	VirtualizationType string          `xml:"virtualizationType"`
	TagSet             *[]xmlTag       `xml:"tagSet>item,omitempty"`
	Hypervisor         string          `xml:"hypervisor"`
	EnaSupport         bool            `xml:"enaSupport"`
	SriovNetSupport    string          `xml:"sriovNetSupport"`
	PlatformDetails    string          `xml:"platformDetails"`
	UsageOperation     string          `xml:"usageOperation"`
	DeprecationTime    string          `xml:"deprecationTime,omitempty"`
	StateReason        *xmlStateReason `xml:"stateReason,omitempty"`
	SourceInstanceID   string          `xml:"sourceInstanceId,omitempty"`
}

type xmlDescribeImages struct {
	XMLName xml.Name `xml:"DescribeImagesResponse"`
	ec2Meta
	Images    []xmlImage `xml:"imagesSet>item"`
	NextToken string     `xml:"nextToken,omitempty"`
}

func renderDescribeImages(images []*Image, next string) response {
	doc := xmlDescribeImages{ec2Meta: meta(), Images: []xmlImage{}, NextToken: next}
	for _, img := range images {
		x := xmlImage{
			ImageID:            img.ID,
			ImageLocation:      orDefault(img.OwnerAlias, img.OwnerID) + "/" + img.Name,
			ImageState:         orDefault(img.State, "available"),
			ImageOwnerID:       img.OwnerID,
			CreationDate:       img.CreationDate,
			IsPublic:           img.Public,
			Architecture:       img.Architecture,
			ImageType:          "machine",
			ImageOwnerAlias:    img.OwnerAlias,
			Name:               img.Name,
			Description:        img.Description,
			RootDeviceType:     orDefault(img.RootDeviceType, "ebs"),
			RootDeviceName:     img.RootDeviceName,
			VirtualizationType: orDefault(img.VirtualizationType, "hvm"),
			Hypervisor:         "xen",
			EnaSupport:         true,
			SriovNetSupport:    "simple",
			PlatformDetails:    "Linux/UNIX",
			UsageOperation:     "RunInstances",
			DeprecationTime:    img.DeprecationTime,
		}
		if img.RootDeviceName != "" || len(img.BlockDevices) > 0 {
			for _, bd := range imageBlockDevices(img) {
				if bd.NoDevice || bd.SnapshotID == "" {
					continue
				}
				x.BlockDeviceMapping = append(x.BlockDeviceMapping, xmlBDM{DeviceName: bd.DeviceName, EBS: xmlEBS{
					SnapshotID: bd.SnapshotID, VolumeSize: bd.VolumeSize, DeleteOnTermination: bd.DeleteOnTermination,
					VolumeType: orDefault(bd.VolumeType, "gp3"), Encrypted: bd.Encrypted,
				}})
			}
		}
		if img.StateReasonCode != "" {
			x.StateReason = &xmlStateReason{Code: img.StateReasonCode, Message: img.StateReasonMessage}
		}
		x.SourceInstanceID = img.SourceInstanceID
		x.TagSet = xmlTags(img.Tags)
		doc.Images = append(doc.Images, x)
	}
	return xmlOK(doc)
}

// CreateImageInput is the decoded form of CreateImage.
type CreateImageInput struct {
	InstanceID   string
	Name         string
	Description  string
	NoReboot     bool
	BlockDevices []BlockDevice
	TagSpecs     []TagSpecification
}

// amiNameShape is EC2's rule: 3-128 characters from letters, digits,
// ()[] ./-'@_ (and spaces).
var amiNameShape = regexp.MustCompile(`^[a-zA-Z0-9()\[\] ./\-'@_]{3,128}$`)

func checkAMIName(name string) error {
	if !amiNameShape.MatchString(name) {
		return inputError("InvalidAMIName.Malformed", "AMI names must be between 3 and 128 characters long, and may contain letters, numbers, '(', ')', '.', '-', '/' and '_' (got %q)", name)
	}
	return nil
}

// ParseCreateImage decodes CreateImage.
func ParseCreateImage(form url.Values) (CreateImageInput, error) {
	in := CreateImageInput{InstanceID: form.Get("InstanceId"), Name: form.Get("Name"), Description: form.Get("Description")}
	if in.InstanceID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter InstanceId")
	}
	if err := checkID(in.InstanceID, "i", "InvalidInstanceID.Malformed"); err != nil {
		return in, err
	}
	if err := checkAMIName(in.Name); err != nil {
		return in, err
	}
	if len(in.Description) > 255 {
		return in, inputError("InvalidParameterValue", "AMI descriptions are at most 255 characters")
	}
	var err error
	if in.NoReboot, err = boolParam(form, "NoReboot"); err != nil {
		return in, err
	}
	if in.BlockDevices, err = parseBlockDevices(form); err != nil {
		return in, err
	}
	in.TagSpecs, err = parseTagSpecifications(form, "image", "snapshot")
	return in, err
}

// ownedImageNamed finds the caller's image with this name. Runs under s.mu.
func (s *Server) ownedImageNamed(rd *regionData, name string) *Image {
	for _, img := range rd.images {
		if img.Name == name && img.OwnerID == s.account && img.State != "deregistered" {
			return img
		}
	}
	return nil
}

func (s *Server) createImage(region string, in CreateImageInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	r := rd.instances[in.InstanceID]
	if r == nil {
		return notFoundInstances([]string{in.InstanceID})
	}
	switch r.State {
	case StateStopped:
	case StateRunning:
		if s.machines != nil {
			return badRequest("IncorrectInstanceState", "The instance '%s' is running; the fake captures the disk of stopped instances only (stop it first, as amazon-ebs does)", r.ID)
		}
	case StateTerminated:
		return badRequest("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be imaged (terminated).", r.ID)
	default:
		// amazon-ebs retries on exactly this message.
		return badRequest("InvalidParameterValue", "Instance is not in state 'running' or 'stopped' (instance '%s' is %s)", r.ID, r.State)
	}
	if dup := s.ownedImageNamed(rd, in.Name); dup != nil {
		return badRequest("InvalidAMIName.Duplicate", "AMI name %s is already in use by AMI %s", in.Name, dup.ID)
	}
	now := s.now()
	img := &Image{
		ID: s.newID("ami"), Name: in.Name, Description: in.Description, OwnerID: s.account, State: "pending",
		Architecture: r.Architecture, CreationDate: ec2Time(now), RootDeviceName: r.RootDeviceName, RootDeviceType: "ebs",
		VirtualizationType: "hvm", Layers: append([]string(nil), r.Layers...), SourceInstanceID: r.ID,
	}
	applyTags(&img.Tags, tagsFor(in.TagSpecs, "image"))
	w := doneWork()
	if s.machines != nil {
		w = &work{}
	}
	for _, v := range r.Volumes {
		vol := rd.volumes[v.VolumeID]
		bd := BlockDevice{DeviceName: v.DeviceName, VolumeSize: defaultRootVolumeGiB, VolumeType: "gp3", DeleteOnTermination: v.DeleteOnTermination}
		if vol != nil {
			bd.VolumeSize, bd.VolumeType = vol.Size, vol.VolumeType
		}
		for _, o := range in.BlockDevices {
			if o.DeviceName == bd.DeviceName && !o.NoDevice {
				if o.VolumeSize > 0 {
					bd.VolumeSize = o.VolumeSize
				}
				if o.VolumeType != "" {
					bd.VolumeType = o.VolumeType
				}
				bd.DeleteOnTermination = o.DeleteOnTermination
			}
		}
		sn := &Snapshot{ID: s.newID("snap"), VolumeID: v.VolumeID, State: "pending", OwnerID: s.account,
			Description: fmt.Sprintf("Created by CreateImage(%s) for %s", r.ID, img.ID), VolumeSize: bd.VolumeSize, StartTime: ec2Time(now)}
		applyTags(&sn.Tags, tagsFor(in.TagSpecs, "snapshot"))
		rd.snapshots[sn.ID] = sn
		rd.snapshotSettle[sn.ID] = &settle{work: w}
		bd.SnapshotID = sn.ID
		img.BlockDevices = append(img.BlockDevices, bd)
	}
	rd.images[img.ID] = img
	rd.imageSettle[img.ID] = &settle{work: w}
	if s.machines != nil {
		m, id, imageID := s.machines, r.ID, img.ID
		var layer string
		s.background(r.machineMu, w, func(ctx context.Context) error {
			l, err := m.Snapshot(ctx, id)
			if err != nil {
				return fmt.Errorf("snapshotting %s for %s: %w", id, imageID, err)
			}
			if l == "" {
				return fmt.Errorf("snapshotting %s for %s: the machine backend returned no layer", id, imageID)
			}
			layer = l
			return nil
		}, func(err error) {
			if img := rd.images[imageID]; err == nil && img != nil {
				img.Layers = append(img.Layers, layer)
			}
		})
	}
	return xmlOK(xmlImageID{XMLName: xml.Name{Local: "CreateImageResponse"}, ec2Meta: meta(), ImageID: img.ID})
}

// CopyImageInput is the decoded form of CopyImage.
type CopyImageInput struct {
	SourceRegion  string
	SourceImageID string
	Name          string
	Description   string
	CopyImageTags bool
	Encrypted     bool
	TagSpecs      []TagSpecification
}

var regionShape = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)

// ParseCopyImage decodes CopyImage.
func ParseCopyImage(form url.Values) (CopyImageInput, error) {
	in := CopyImageInput{SourceRegion: form.Get("SourceRegion"), SourceImageID: form.Get("SourceImageId"), Name: form.Get("Name"), Description: form.Get("Description")}
	if !regionShape.MatchString(in.SourceRegion) {
		return in, inputError("InvalidParameterValue", "Invalid source region '%s'", in.SourceRegion)
	}
	if in.SourceImageID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter SourceImageId")
	}
	if err := checkID(in.SourceImageID, "ami", "InvalidAMIID.Malformed"); err != nil {
		return in, err
	}
	if err := checkAMIName(in.Name); err != nil {
		return in, err
	}
	var err error
	if in.CopyImageTags, err = boolParam(form, "CopyImageTags"); err != nil {
		return in, err
	}
	if in.Encrypted, err = boolParam(form, "Encrypted"); err != nil {
		return in, err
	}
	in.TagSpecs, err = parseTagSpecifications(form, "image", "snapshot")
	return in, err
}

func (s *Server) copyImage(region string, in CopyImageInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.region(in.SourceRegion).images[in.SourceImageID]
	if src == nil || !s.launchable(src) {
		return badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", in.SourceImageID)
	}
	if st := orDefault(src.State, "available"); st != "available" {
		return badRequest("InvalidAMIID.Unavailable", "The image id '[%s]' is %s; only available images can be copied", in.SourceImageID, st)
	}
	rd := s.region(region)
	if dup := s.ownedImageNamed(rd, in.Name); dup != nil {
		return badRequest("InvalidAMIName.Duplicate", "AMI name %s is already in use by AMI %s", in.Name, dup.ID)
	}
	now := s.now()
	img := &Image{
		ID: s.newID("ami"), Name: in.Name, Description: orDefault(in.Description, src.Description), OwnerID: s.account, State: "pending",
		Architecture: src.Architecture, CreationDate: ec2Time(now), RootDeviceName: src.RootDeviceName, RootDeviceType: src.RootDeviceType,
		VirtualizationType: src.VirtualizationType, Layers: append([]string(nil), src.Layers...),
		SourceImageID: src.ID, SourceRegion: in.SourceRegion,
	}
	if in.CopyImageTags {
		img.Tags = copyTags(src.Tags)
	}
	applyTags(&img.Tags, tagsFor(in.TagSpecs, "image"))
	for _, bd := range imageBlockDevices(src) {
		if bd.SnapshotID != "" {
			sn := &Snapshot{ID: s.newID("snap"), VolumeID: "vol-ffffffff", State: "pending", OwnerID: s.account,
				Description: fmt.Sprintf("Copied for DestinationAmi %s from SourceAmi %s for SourceSnapshot %s", img.ID, src.ID, bd.SnapshotID),
				VolumeSize:  bd.VolumeSize, StartTime: ec2Time(now), Encrypted: in.Encrypted || bd.Encrypted}
			applyTags(&sn.Tags, tagsFor(in.TagSpecs, "snapshot"))
			rd.snapshots[sn.ID] = sn
			rd.snapshotSettle[sn.ID] = &settle{work: doneWork()}
			bd.SnapshotID = sn.ID
		}
		bd.Encrypted = bd.Encrypted || in.Encrypted
		img.BlockDevices = append(img.BlockDevices, bd)
	}
	rd.images[img.ID] = img
	rd.imageSettle[img.ID] = &settle{work: doneWork()}
	return xmlOK(xmlImageID{XMLName: xml.Name{Local: "CopyImageResponse"}, ec2Meta: meta(), ImageID: img.ID})
}

// ImageIDInput is the decoded form of calls that name one image:
// DeregisterImage, EnableImageDeprecation, DescribeImageAttribute.
type ImageIDInput struct {
	ImageID                   string
	DeleteAssociatedSnapshots bool
	DeprecateAt               string // RFC 3339, EnableImageDeprecation
}

// ParseImageID decodes the ImageId of DeregisterImage and friends.
func ParseImageID(form url.Values) (ImageIDInput, error) {
	in := ImageIDInput{ImageID: form.Get("ImageId"), DeprecateAt: form.Get("DeprecateAt")}
	if in.ImageID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter ImageId")
	}
	if err := checkID(in.ImageID, "ami", "InvalidAMIID.Malformed"); err != nil {
		return in, err
	}
	var err error
	in.DeleteAssociatedSnapshots, err = boolParam(form, "DeleteAssociatedSnapshots")
	return in, err
}

// ParseEnableImageDeprecation decodes EnableImageDeprecation: an image and
// an RFC 3339 DeprecateAt.
func ParseEnableImageDeprecation(form url.Values) (ImageIDInput, error) {
	in, err := ParseImageID(form)
	if err != nil {
		return in, err
	}
	if _, perr := time.Parse(time.RFC3339, in.DeprecateAt); perr != nil {
		return in, inputError("InvalidParameterValue", "DeprecateAt %q is not an RFC 3339 time", in.DeprecateAt)
	}
	return in, nil
}

// ownedImage finds an image the caller may change. Runs under s.mu.
func (s *Server) ownedImage(rd *regionData, id string) (*Image, response, bool) {
	img := rd.images[id]
	if img == nil || !s.visibleTo(img) {
		return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id), false
	}
	if img.OwnerID != s.account {
		return nil, ec2Error(http.StatusBadRequest, "AuthFailure", "Not authorized for image:"+id), false
	}
	return img, response{}, true
}

func (s *Server) deregisterImage(region string, in ImageIDInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	if d, gone := rd.deregistered[in.ImageID]; rd.images[in.ImageID] == nil && gone && s.now().Sub(d.at) < DeregisteredVisible && s.visibleTo(&d.img) {
		// EC2 answers a second DeregisterImage of a lately deregistered image with
		// InvalidAMIID.Unavailable, not NotFound (github.com/ansible/ansible/issues/24945,
		// github.com/aeternity/infrastructure/pull/89): what a retry after a lost answer meets.
		return badRequest("InvalidAMIID.Unavailable", "The image ID '%s' is no longer available", in.ImageID)
	}
	img, errResp, ok := s.ownedImage(rd, in.ImageID)
	if !ok {
		return errResp
	}
	delete(rd.images, img.ID)
	delete(rd.imageSettle, img.ID)
	gone := cloneImage(*img)
	gone.State = "deregistered"
	rd.deregistered[img.ID] = deregisteredImage{img: gone, at: s.now()}
	if in.DeleteAssociatedSnapshots {
		for _, bd := range img.BlockDevices {
			delete(rd.snapshots, bd.SnapshotID)
			delete(rd.snapshotSettle, bd.SnapshotID)
		}
	}
	return returnTrue(OpDeregisterImage)
}

func (s *Server) enableImageDeprecation(region string, in ImageIDInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	img, errResp, ok := s.ownedImage(s.region(region), in.ImageID)
	if !ok {
		return errResp
	}
	t, _ := time.Parse(time.RFC3339, in.DeprecateAt) // checked by the parser
	img.DeprecationTime = ec2Time(t)
	return returnTrue(OpEnableImageDeprecation)
}

type xmlImageID struct {
	XMLName xml.Name
	ec2Meta
	ImageID string `xml:"imageId"`
}

// AttributeInput is the decoded form of ModifyImageAttribute and
// ModifySnapshotAttribute: add/remove launch (or create-volume) permissions,
// or set the description.
type AttributeInput struct {
	ResourceID   string
	AddUsers     []string
	RemoveUsers  []string
	AddGroups    []string // "all" makes an image public
	RemoveGroups []string
	Description  *string
}

var accountShape = regexp.MustCompile(`^\d{12}$`)

func parsePermissionList(form url.Values, prefix string) (users, groups []string, err error) {
	for _, i := range listIndices(form, prefix) {
		if u := form.Get(fmt.Sprintf("%s.%d.UserId", prefix, i)); u != "" {
			if !accountShape.MatchString(u) {
				return nil, nil, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for userId item type.", u)
			}
			users = append(users, u)
		}
		if g := form.Get(fmt.Sprintf("%s.%d.Group", prefix, i)); g != "" {
			if g != "all" {
				return nil, nil, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for group item type.", g)
			}
			groups = append(groups, g)
		}
	}
	return users, groups, nil
}

func parseAttribute(form url.Values, idParam, prefix, malformedCode, perm string) (AttributeInput, error) {
	in := AttributeInput{ResourceID: form.Get(idParam)}
	if in.ResourceID == "" {
		return in, inputError("MissingParameter", "The request must contain the parameter %s", idParam)
	}
	if err := checkID(in.ResourceID, prefix, malformedCode); err != nil {
		return in, err
	}
	var err error
	if in.AddUsers, in.AddGroups, err = parsePermissionList(form, perm+".Add"); err != nil {
		return in, err
	}
	if in.RemoveUsers, in.RemoveGroups, err = parsePermissionList(form, perm+".Remove"); err != nil {
		return in, err
	}
	// The flat form: Attribute=launchPermission&OperationType=add&UserId.1=...
	users, groups := indexedList(form, "UserId"), indexedList(form, "UserGroup")
	for _, u := range users {
		if !accountShape.MatchString(u) {
			return in, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for userId item type.", u)
		}
	}
	for _, g := range groups {
		switch g {
		case "all":
		case "":
			// An empty UserGroup.N is no group at all; EC2 refuses it rather than
			// reading it as "all" or as nothing.
			return in, inputError("InvalidParameterValue", "Value () for parameter userGroup is invalid. Valid values: all")
		default:
			return in, inputError("InvalidAMIAttributeItemValue", "Invalid attribute item value \"%s\" for group item type.", g)
		}
	}
	switch form.Get("OperationType") {
	case "add":
		in.AddUsers, in.AddGroups = append(in.AddUsers, users...), append(in.AddGroups, groups...)
	case "remove":
		in.RemoveUsers, in.RemoveGroups = append(in.RemoveUsers, users...), append(in.RemoveGroups, groups...)
	case "":
		if len(users)+len(groups) > 0 {
			return in, inputError("MissingParameter", "UserId/UserGroup need OperationType add or remove")
		}
	default:
		return in, inputError("InvalidParameterValue", "Value (%s) for parameter operationType is invalid. Valid values: add, remove", form.Get("OperationType"))
	}
	if d, ok := form["Description.Value"]; ok && len(d) > 0 {
		in.Description = &d[0]
	}
	if len(in.AddUsers)+len(in.AddGroups)+len(in.RemoveUsers)+len(in.RemoveGroups) == 0 && in.Description == nil {
		return in, inputError("MissingParameter", "The request must change a permission or the description")
	}
	return in, nil
}

// changeUsers applies the change's added and removed accounts to the users
// holding a permission (an image's launch, a snapshot's create-volume).
func (in AttributeInput) changeUsers(users []string) []string {
	for _, u := range in.AddUsers {
		if !contains(users, u) {
			users = append(users, u)
		}
	}
	var kept []string
	for _, u := range users {
		if !contains(in.RemoveUsers, u) {
			kept = append(kept, u)
		}
	}
	return kept
}

// ParseModifyImageAttribute decodes ModifyImageAttribute.
func ParseModifyImageAttribute(form url.Values) (AttributeInput, error) {
	return parseAttribute(form, "ImageId", "ami", "InvalidAMIID.Malformed", "LaunchPermission")
}

func (s *Server) modifyImageAttribute(region string, in AttributeInput) response {
	s.mu.Lock()
	defer s.mu.Unlock()
	rd := s.region(region)
	img, errResp, ok := s.ownedImage(rd, in.ResourceID)
	if !ok {
		return errResp
	}
	img.LaunchUsers = in.changeUsers(img.LaunchUsers)
	if len(in.AddGroups) > 0 {
		img.Public = true
	}
	if len(in.RemoveGroups) > 0 {
		img.Public = false
	}
	if in.Description != nil {
		img.Description = *in.Description
	}
	return returnTrue(OpModifyImageAttribute)
}
