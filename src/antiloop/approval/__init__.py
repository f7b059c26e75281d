"""People in the loop: approval requests, policy and channels."""
