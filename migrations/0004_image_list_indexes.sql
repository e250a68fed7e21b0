-- The admin image list sorts everyone's images by upload time and filters by token.
CREATE INDEX images_created ON images(created_at);
CREATE INDEX images_token ON images(token_id) WHERE token_id IS NOT NULL;
