package quota

import "github.com/quotactl/quotactl/quota/backend"

// ErrLabelTaken is wrapped by the error Take returns when a label is
// already held by another credential of the API; the message names the fix.
var ErrLabelTaken = backend.ErrLabelTaken
