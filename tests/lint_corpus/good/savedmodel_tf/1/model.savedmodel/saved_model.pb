placeholder: a SavedModel protobuf goes here
