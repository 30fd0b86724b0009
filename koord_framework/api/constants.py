"""Label, annotation and resource names Koordinator reads and writes (apis/extension), spelled exactly."""

DOMAIN_PREFIX = "koordinator.sh/"
SCHEDULING_DOMAIN = "scheduling.koordinator.sh"
NODE_DOMAIN = "node.koordinator.sh"

LABEL_QOS_CLASS = "koordinator.sh/qosClass"
LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_PRIORITY = "koordinator.sh/priority"

ANNOTATION_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
ANNOTATION_CUSTOM_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"
ANNOTATION_LOAD_ESTIMATED_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_SCHEDULED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
)
ANNOTATION_LOAD_ESTIMATED_SECONDS_AFTER_INITIALIZED = (
    "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
)
ANNOTATION_RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
ANNOTATION_NODE_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
ANNOTATION_NODE_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"

LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"
ANNOTATION_EVICTION_POLICY = "koordinator.sh/eviction-policy"
ANNOTATION_EVICTION_PRIORITY = "koordinator.sh/eviction-priority"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"
ANNOTATION_POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_DESCHEDULER_EVICT = "descheduler.alpha.kubernetes.io/evict"
ANNOTATION_MIRROR_POD = "kubernetes.io/config.mirror"
ANNOTATION_CONFIG_SOURCE = "kubernetes.io/config.source"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
