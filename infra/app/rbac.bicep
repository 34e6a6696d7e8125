// Role assignments, least privilege. The same roles go to the deploying user when
// principalId is given, so the demo can run from a laptop against the cloud account.
param storageAccountName string
param checkpointContainerName string
param applicationInsightsName string
param identityPrincipalId string
@description('Object ID of the deploying user; empty to skip.')
param userPrincipalId string = ''

// Built-in role definition IDs.
var storageBlobDataOwner = 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
var storageBlobDataContributor = 'ba92f5b4-2d11-453d-a403-e96b0029c9fe'
var monitoringMetricsPublisher = '3913510d-42f4-4e42-8a64-420c390055eb'
// Queue triggers with an identity need to read, update and delete messages, and to move a
// failed one to the poison queue (a send to another queue): Storage Queue Data
// Contributor. Message Processor alone cannot send, so it cannot poison a message.
var storageQueueDataContributor = '974c5e8b-45b9-4653-ba55-5f855dd0fb88'

var appPrincipal = {
  id: identityPrincipalId
  type: 'ServicePrincipal'
}
var userPrincipal = {
  id: userPrincipalId
  type: 'User'
}
var principals = empty(userPrincipalId) ? array(appPrincipal) : concat(array(appPrincipal), array(userPrincipal))

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource checkpointContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' existing = {
  name: '${storageAccountName}/default/${checkpointContainerName}'
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// The Functions host keeps its own state (keys, leases, deployment package) in blobs.
resource hostStorageOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principal in principals: {
    name: guid(storage.id, principal.id, storageBlobDataOwner)
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataOwner)
      principalId: principal.id
      principalType: principal.type
    }
  }
]

// Checkpoints: read and create blobs, scoped to the one container.
resource checkpointContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principal in principals: {
    name: guid(checkpointContainer.id, principal.id, storageBlobDataContributor)
    scope: checkpointContainer
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageBlobDataContributor)
      principalId: principal.id
      principalType: principal.type
    }
  }
]

// The run queue and its poison queue, and any queue the host itself uses: the account's
// queue service (queues have no narrower scope that covers the host's own).
resource queueContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principal in principals: {
    name: guid(storage.id, principal.id, storageQueueDataContributor)
    scope: storage
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', storageQueueDataContributor)
      principalId: principal.id
      principalType: principal.type
    }
  }
]

resource metricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = [
  for principal in principals: {
    name: guid(applicationInsights.id, principal.id, monitoringMetricsPublisher)
    scope: applicationInsights
    properties: {
      roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', monitoringMetricsPublisher)
      principalId: principal.id
      principalType: principal.type
    }
  }
]
