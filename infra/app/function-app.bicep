// The Flex Consumption (FC1) plan and the Linux Python function app.
// Every connection is identity-based: no connection strings, no keys.
param name string
param planName string
param location string
param tags object = {}
param identityId string
param identityClientId string
param storageBlobEndpoint string
param storageQueueEndpoint string
@description('The run queue background runs use (the storage module creates it and its poison queue).')
param runsQueueName string
param deploymentContainerName string
param checkpointContainerName string
param applicationInsightsConnectionString string
@description('Memory per instance, in MB.')
@allowed([
  512
  2048
  4096
])
param instanceMemoryMB int
@minValue(1)
@maxValue(1000)
param maximumInstanceCount int
@description('Always-ready instances for the run_in_background queue trigger (0: scale from zero).')
@minValue(0)
param backgroundAlwaysReady int = 0
@description('Python on Flex Consumption: 3.13 (the default; azure-functions 2.x), or 3.12 / 3.11 (azure-functions 1.x). requirements.txt picks the matching package by environment marker.')
@allowed([
  '3.11'
  '3.12'
  '3.13'
])
param pythonVersion string = '3.13'
@description('Which workflow factory to host (workflows/__init__.py).')
param workflow string = 'default'
param azureOpenAiEndpoint string = ''
param azureOpenAiDeployment string = ''
@secure()
@description('Key for an OpenAI-compatible endpoint (not Azure OpenAI, which uses the identity).')
param openAiCompatibleApiKey string = ''
@secure()
@description('Webhook signing secret(s); empty turns signature verification off.')
param webhookSecret string = ''
@allowed([
  'standard'
  'github'
  'slack'
])
@description('The signature scheme WEBHOOK_SECRET verifies.')
param webhookScheme string = 'standard'
@description('Headers whose value deduplicates a delivery, comma-separated, first present wins; empty: the app default for the scheme (X-GitHub-Delivery first for github).')
param idempotencyHeaders string = ''
@description('THREAD_AUTHORIZER (module:function); empty lets any caller with a function key use any thread.')
param threadAuthorizer string = ''
@description('Entra ID app (client) ID for App Service Authentication (Easy Auth) in front of the app; empty leaves it off.')
param easyAuthClientId string = ''
@description('Key Vault secret URI holding CALLBACK_SECRET (whsec_...), which signs completion callbacks; empty turns callbacks off (a request asking for one gets 500). The identity needs Key Vault Secrets User on the vault.')
param callbackSecretUri string = ''
@description('Hosts callbacks may go to, comma-separated (exact names and *.example.com); empty allows any public HTTPS host.')
param callbackAllowedHosts string = ''
@description('Key Vault secret URI holding CHECKPOINT_MAC_KEYS (kid:base64key[,...]); empty leaves checkpoint MACs off. The identity needs Key Vault Secrets User on the vault.')
param checkpointMacKeysSecretUri string = ''
@description('Key Vault secret URI holding GITHUB_WEBHOOK_SECRET (the GitHub webhook\'s secret); set, it registers POST /api/adapters/github. The identity needs Key Vault Secrets User on the vault.')
param githubWebhookSecretUri string = ''
@description('Key Vault secret URI holding SLACK_SIGNING_SECRET (the Slack app\'s signing secret); set, it registers POST /api/adapters/slack/events and /slack/answer.')
param slackSigningSecretUri string = ''
@description('Key Vault secret URI holding SLACK_BOT_TOKEN (xoxb-...), which posts replies into Slack threads.')
param slackBotTokenUri string = ''
@description('ADAPTER_ANSWER_URL: where the adapters\' turns send their completion callback, e.g. https://<app>.azurewebsites.net/api/adapters/slack/answer; empty: no callback.')
param adapterAnswerUrl string = ''
@description('Subnet for outbound VNet integration; empty for none.')
param virtualNetworkSubnetId string = ''

// Settings the code reads (resumable/settings.py), in their identity-based form,
// plus what the platform and the HTTP streaming extension need.
var easyAuthIssuer = 'https://login.microsoftonline.com/${tenant().tenantId}/v2.0'

var appSettings = {
  AzureWebJobsStorage__credential: 'managedidentity'
  AzureWebJobsStorage__clientId: identityClientId
  AzureWebJobsStorage__blobServiceUri: storageBlobEndpoint
  // The run queue: the queue trigger and the app's enqueue both use this identity-based
  // connection (AzureWebJobsStorage), never a key.
  AzureWebJobsStorage__queueServiceUri: storageQueueEndpoint
  RUNS_QUEUE: runsQueueName
  // Completion callbacks: signed with a secret resolved from Key Vault by the app's identity
  // (never a literal, never defaulted); without it a request that asks for a callback is a 500.
  CALLBACK_SECRET: empty(callbackSecretUri) ? '' : '@Microsoft.KeyVault(SecretUri=${callbackSecretUri})'
  CALLBACK_URL: ''
  CALLBACK_ALLOWED_HOSTS: callbackAllowedHosts
  // Local development only (http://127.0.0.1): never on in Azure.
  CALLBACK_ALLOW_LOCAL_HTTP: 'false'
  CALLBACK_MAX_ATTEMPTS: '20'
  CALLBACK_MAX_SECONDS: '86400'
  CALLBACK_RETRY_SCHEDULE: '5,30,120,600,1800,3600,7200'
  // The web console (GET /api/console): off in Azure; an operator turns it on by setting it.
  CONSOLE_ENABLED: 'false'
  // The Slack and GitHub adapters: each is registered at start-up only when its signing secret
  // is set. Secrets come from Key Vault by the app's identity, never as literals.
  GITHUB_WEBHOOK_SECRET: empty(githubWebhookSecretUri) ? '' : '@Microsoft.KeyVault(SecretUri=${githubWebhookSecretUri})'
  SLACK_SIGNING_SECRET: empty(slackSigningSecretUri) ? '' : '@Microsoft.KeyVault(SecretUri=${slackSigningSecretUri})'
  SLACK_BOT_TOKEN: empty(slackBotTokenUri) ? '' : '@Microsoft.KeyVault(SecretUri=${slackBotTokenUri})'
  ADAPTER_ANSWER_URL: adapterAnswerUrl
  // Empty: https://slack.com/api.
  SLACK_API_URL: ''
  CHECKPOINT_STORAGE__blobServiceUri: storageBlobEndpoint
  CHECKPOINT_STORAGE__clientId: identityClientId
  CHECKPOINT_CONTAINER: checkpointContainerName
  CHECKPOINT_ALLOWED_TYPES: ''
  // HMAC keys for checkpoint blobs, resolved from Key Vault by the app's identity; never a literal.
  CHECKPOINT_MAC_KEYS: empty(checkpointMacKeysSecretUri) ? '' : '@Microsoft.KeyVault(SecretUri=${checkpointMacKeysSecretUri})'
  MAX_REQUEST_BYTES: '1048576'
  MAX_CHECKPOINT_BYTES: '4194304'
  CHECKPOINT_CACHE_BYTES: '134217728'
  MAX_MESSAGES: '100'
  MAX_MESSAGE_CHARS: '32000'
  MAX_RESPONSES: '100'
  STORAGE_TIMEOUT_SECONDS: '10'
  IDEMPOTENCY_TTL_SECONDS: '86400'
  // Standard Webhooks secrets (whsec_...), space-separated during rotation. Empty turns
  // verification off; in production use a Key Vault reference rather than a literal.
  WEBHOOK_SECRET: webhookSecret
  WEBHOOK_TOLERANCE_SECONDS: '300'
  // Which scheme WEBHOOK_SECRET verifies (standard, github or slack), and which headers name a
  // delivery for deduplication, first present wins (GitHub: X-GitHub-Delivery).
  WEBHOOK_SCHEME: webhookScheme
  IDEMPOTENCY_HEADERS: idempotencyHeaders
  // A comment line on a silent SSE stream this often, so idle-timeout proxies keep it open.
  SSE_KEEPALIVE_SECONDS: '15'
  // How long an enqueue turn waits for the turn ahead of it on the same instance (then 409).
  THREAD_LOCK_WAIT_SECONDS: '30'
  // How long one invocation runs a superstep-durable background turn before handing it on at a
  // superstep boundary; below host.json's functionTimeout (30 min) by more than one superstep.
  RUN_BUDGET_SECONDS: '1500'
  // Who may touch a thread (module:function); the ready one binds thread IDs to the caller's
  // Entra ID object ID, trusted only with Easy Auth on (easyAuthClientId below).
  THREAD_AUTHORIZER: threadAuthorizer
  THREAD_PRINCIPAL_HEADER: ''
  THREAD_PRINCIPAL_CLAIM: ''
  // The Entra ID issuer Easy Auth validates (the same as authsettingsV2's): the A2A agent card names it.
  EASY_AUTH_ISSUER: empty(easyAuthClientId) ? '' : easyAuthIssuer
  THREAD_DELETE_SECONDS: '20'
  // A turn on an expired thread: refuse (410 once) or restart (a new thread, "thread_created": true).
  THREAD_EXPIRED: 'refuse'
  // How long one run of the hourly housekeeping timer works before recording where it stopped
  // (the next run goes on); well inside the 30-minute function timeout.
  MAINTENANCE_SECONDS: '300'
  WORKFLOW: workflow
  // The model for WORKFLOW=chat-agents: Azure OpenAI as the managed identity (AZURE_CLIENT_ID
  // picks it for DefaultAzureCredential), or an OpenAI-compatible endpoint and key.
  AZURE_OPENAI_ENDPOINT: azureOpenAiEndpoint
  AZURE_OPENAI_DEPLOYMENT: azureOpenAiDeployment
  AZURE_OPENAI_API_VERSION: ''
  OPENAI_BASE_URL: ''
  OPENAI_API_KEY: openAiCompatibleApiKey
  OPENAI_MODEL: ''
  AZURE_CLIENT_ID: identityClientId
  PYTHON_APPLICATIONINSIGHTS_ENABLE_TELEMETRY: 'true'
  APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
  APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  // Message content stays out of telemetry and logs unless this is turned on.
  ENABLE_SENSITIVE_DATA: 'false'
}

// The Python worker for 3.11 and 3.12 indexes the app at init, which the HTTP streaming
// extension needs, only with PYTHON_ENABLE_INIT_INDEXING=1. The 3.13+ worker
// (azure-functions-runtime) always does and never reads the setting, so it is left out there.
var pythonWorkerSettings = contains(['3.11', '3.12'], pythonVersion) ? { PYTHON_ENABLE_INIT_INDEXING: '1' } : {}

var backgroundReadyInstances = [
  {
    name: 'function:run_in_background'
    instanceCount: backgroundAlwaysReady
  }
]

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    name: 'FC1'
    tier: 'FlexConsumption'
  }
  properties: {
    reserved: true
  }
}

resource functionApp 'Microsoft.Web/sites@2024-04-01' = {
  name: name
  location: location
  tags: union(tags, {
    'azd-service-name': 'api'
  })
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: {
      '${identityId}': {}
    }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // Key Vault references (CHECKPOINT_MAC_KEYS, CALLBACK_SECRET, the adapters' secrets) resolve
    // as the user-assigned identity.
    keyVaultReferenceIdentity: identityId
    clientCertMode: 'Optional'
    virtualNetworkSubnetId: empty(virtualNetworkSubnetId) ? null : virtualNetworkSubnetId
    siteConfig: {
      minTlsVersion: '1.2'
      scmMinTlsVersion: '1.2'
      ftpsState: 'Disabled'
      http20Enabled: true
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${storageBlobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      // Flex Consumption scales every non-HTTP function on its own ("per-function
      // scaling"): run_in_background grows with the run queue's length, apart from the
      // HTTP group that answers the 202s. Always-ready instances are named per function
      // ("function:<name>", aka.ms/flexconsumption/alwaysready); none by default.
      scaleAndConcurrency: {
        instanceMemoryMB: instanceMemoryMB
        maximumInstanceCount: maximumInstanceCount
        alwaysReady: backgroundAlwaysReady > 0 ? backgroundReadyInstances : []
      }
      runtime: {
        name: 'python'
        version: pythonVersion
      }
    }
  }

  resource settings 'config' = {
    name: 'appsettings'
    properties: union(appSettings, pythonWorkerSettings)
  }
}


// Optional App Service Authentication with Entra ID: callers need a token for the app,
// the platform validates it and forwards X-MS-CLIENT-PRINCIPAL (which the ready thread
// authorizer then trusts). Health stays open for probes.
resource easyAuth 'Microsoft.Web/sites/config@2024-04-01' = if (length(easyAuthClientId) > 0) {
  parent: functionApp
  name: 'authsettingsV2'
  properties: {
    platform: {
      enabled: true
    }
    globalValidation: {
      requireAuthentication: true
      unauthenticatedClientAction: 'Return401'
      // Health for probes; the adapters authenticate their senders by signature.
      excludedPaths: [
        '/api/health'
        '/api/adapters/github'
        '/api/adapters/slack/events'
        '/api/adapters/slack/answer'
      ]
    }
    identityProviders: {
      azureActiveDirectory: {
        enabled: true
        registration: {
          clientId: easyAuthClientId
          openIdIssuer: easyAuthIssuer
        }
        validation: {
          allowedAudiences: [
            'api://${easyAuthClientId}'
          ]
        }
      }
    }
  }
}

output name string = functionApp.name
output defaultHostName string = functionApp.properties.defaultHostName
