// One storage account for the Functions host, the deployment package and the
// checkpoints. Keys are disabled: every caller authenticates with Entra ID.
param name string
param location string
param tags object = {}
param deploymentContainerName string
param checkpointContainerName string
@description('Delete checkpoints and thread pointers not read or written for this many days; 0 keeps them forever.')
param checkpointRetentionDays int
@description('Delete idempotency records this many days after their last write.')
param idempotencyRetentionDays int = 2
param vnetEnabled bool
@description('The run queue background runs use (RUNS_QUEUE); the host adds <name>-poison.')
param runsQueueName string
@description('Zone-redundant by default: a lost checkpoint is a lost conversation.')
param skuName string = 'Standard_ZRS'

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: {
    name: skuName
  }
  properties: {
    accessTier: 'Hot'
    allowBlobPublicAccess: false
    allowSharedKeyAccess: false
    allowCrossTenantReplication: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: vnetEnabled ? 'Disabled' : 'Enabled'
    networkAcls: {
      bypass: vnetEnabled ? 'None' : 'AzureServices'
      defaultAction: vnetEnabled ? 'Deny' : 'Allow'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    deleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    containerDeleteRetentionPolicy: {
      enabled: true
      days: 7
    }
    // Retention goes by idle time (see idleThreadRule), which needs each blob's last
    // access time. Reads update it at most once a day.
    lastAccessTimeTrackingPolicy: {
      enable: true
      name: 'AccessTimeTracking'
      trackingGranularityInDays: 1
      blobType: [
        'blockBlob'
      ]
    }
  }
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: {
    publicAccess: 'None'
  }
}

resource checkpointContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: checkpointContainerName
  properties: {
    publicAccess: 'None'
  }
}

// Background runs: the run queue, and the poison queue the host moves a message to after
// host.json's maxDequeueCount. Created here so both exist (and can be watched) before the
// first message; the names come from the same parameter as the RUNS_QUEUE app setting.
resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource runsQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queueService
  name: runsQueueName
}

resource runsPoisonQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queueService
  name: '${runsQueueName}-poison'
}

// Checkpoints are immutable and one is written per turn, so without a rule the
// container only grows. The clock is idle time, not age: every turn reads its thread's
// pointer and head checkpoint and writes new ones, so a thread in use never loses its
// head, however old it is. A thread left alone for N days goes whole, pointer and
// checkpoints alike (in no set order: a pointer whose head is gone answers 410
// thread_expired). Older history ages out N days after it was last read.
var idleThreadRule = {
  name: 'expire-idle-threads'
  enabled: true
  type: 'Lifecycle'
  definition: {
    filters: {
      blobTypes: [
        'blockBlob'
      ]
      prefixMatch: [
        '${checkpointContainerName}/checkpoints/'
        '${checkpointContainerName}/threads/'
      ]
    }
    actions: {
      baseBlob: {
        delete: {
          daysAfterLastAccessTimeGreaterThan: checkpointRetentionDays
        }
      }
    }
  }
}

// Idempotency records carry their own TTL (IDEMPOTENCY_TTL_SECONDS, 1 day by default);
// this rule removes them from storage a day after they stop counting. Background runs'
// records, event logs (append blobs), pending lists and callback delivery records go the
// same way: a run's status stays readable for this long after its last change. So does the
// housekeeping timer's record, rewritten by every daily pass: if the timer stops, the next
// pass starts afresh.
var idempotencyRule = {
  name: 'expire-idempotency-records'
  enabled: true
  type: 'Lifecycle'
  definition: {
    filters: {
      blobTypes: [
        'blockBlob'
        'appendBlob'
      ]
      prefixMatch: [
        '${checkpointContainerName}/idempotency/'
        '${checkpointContainerName}/runs/'
        '${checkpointContainerName}/run-order/'
        '${checkpointContainerName}/callbacks/'
        '${checkpointContainerName}/maintenance/'
      ]
    }
    actions: {
      baseBlob: {
        delete: {
          daysAfterModificationGreaterThan: idempotencyRetentionDays
        }
      }
    }
  }
}

resource lifecycle 'Microsoft.Storage/storageAccounts/managementPolicies@2023-05-01' = {
  parent: storage
  name: 'default'
  properties: {
    policy: {
      rules: checkpointRetentionDays > 0 ? concat(array(idleThreadRule), array(idempotencyRule)) : array(idempotencyRule)
    }
  }
}

output name string = storage.name
output id string = storage.id
output blobEndpoint string = storage.properties.primaryEndpoints.blob
output queueEndpoint string = storage.properties.primaryEndpoints.queue
output checkpointContainerId string = checkpointContainer.id
