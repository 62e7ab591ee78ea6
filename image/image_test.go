package image
